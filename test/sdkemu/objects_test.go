package sdkemu_test

import (
	"bytes"
	"slices"
	"testing"

	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
)

// objectUnary is case d: a put that fits one message, the two listings with a nested
// key, the metadata, a delete and a second delete (OBJECT_NOT_FOUND).
func (f *fixture) objectUnary(t *testing.T) {
	content := bytes.Repeat([]byte("d"), 40<<10)
	call(t, f.sdk, objects("put_object"), &osv1.PutObjectRequest{Prefix: "docs", Key: "a.txt", Content: content}, &osv1.PutObjectResponse{})
	call(t, f.sdk, objects("put_object"), &osv1.PutObjectRequest{Prefix: "docs", Key: "2024/q1/b.txt", Content: []byte("b")}, &osv1.PutObjectResponse{})

	var got osv1.GetObjectResponse
	call(t, f.sdk, objects("get_object"), &osv1.GetObjectRequest{Prefix: "docs", Key: "a.txt"}, &got)
	if !bytes.Equal(got.GetContent(), content) {
		t.Errorf("get_object: %d bytes back, want the %d put", len(got.GetContent()), len(content))
	}
	var flat osv1.ListObjectsResponse
	call(t, f.sdk, objects("list_objects"), &osv1.ListObjectsRequest{Prefix: "docs"}, &flat)
	if keys := flat.GetKeys().GetKeys(); !slices.Equal(keys, []string{"a.txt"}) {
		t.Errorf("list_objects docs: %q, want only the object directly under it", keys)
	}
	var deep osv1.ListObjectsRecursiveResponse
	call(t, f.sdk, objects("list_objects_recursive"), &osv1.ListObjectsRecursiveRequest{Prefix: "docs"}, &deep)
	if keys := deep.GetKeys().GetKeys(); !slices.Equal(keys, []string{"2024/q1/b.txt", "a.txt"}) {
		t.Errorf("list_objects_recursive docs: %q", keys)
	}
	var meta osv1.GetObjectMetadataResponse
	call(t, f.sdk, objects("get_object_metadata"), &osv1.GetObjectMetadataRequest{Prefix: "docs", Key: "a.txt"}, &meta)
	m := meta.GetMetadata()
	if m.GetFilePath() != "docs/a.txt" || m.GetFileName() != "a.txt" || m.GetFileSizeBytes() != int64(len(content)) || m.ModifiedTime == nil {
		t.Errorf("get_object_metadata: %v", m)
	}
	call(t, f.sdk, objects("delete_object"), &osv1.DeleteObjectRequest{Prefix: "docs", Key: "a.txt"}, &osv1.DeleteObjectResponse{})
	refused(t, f.sdk, objects("delete_object"), &osv1.DeleteObjectRequest{Prefix: "docs", Key: "a.txt"}, &osv1.DeleteObjectResponse{}, "OBJECT_NOT_FOUND", false)
	refused(t, f.sdk, objects("get_object"), &osv1.GetObjectRequest{Prefix: "docs", Key: "a.txt"}, &osv1.GetObjectResponse{}, "OBJECT_NOT_FOUND", false)
	refused(t, f.sdk, objects("get_object_metadata"), &osv1.GetObjectMetadataRequest{Prefix: "docs", Key: "a.txt"}, &osv1.GetObjectMetadataResponse{}, "OBJECT_NOT_FOUND", false)
}
