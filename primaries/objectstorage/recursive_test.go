package objectstorage_test

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/objectstorage/memory"
	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	"github.com/abi-engine/engine/protocol"
)

// TestProtobufListings: list_objects_recursive names every object relative to the
// prefix; list_objects of a prefix that holds objects only deeper down is an empty
// Keys (bytes 0a 00), not OBJECT_NOT_FOUND, so the two listings agree on whether a
// prefix exists, as the Python engine's do; both are OBJECT_NOT_FOUND once nothing is
// left under it.
func TestProtobufListings(t *testing.T) {
	secret := []byte("a test secret of 32 bytes or so!")
	v, err := servicetoken.NewVerifier(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc := servePrimary(t, natstest.Start(t), memory.New(), "engine-os", func(c *primaries.Config) { c.Tokens = v })
	tok, err := servicetoken.Mint(secret, "sdk-ci", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := pbClient{t: t, nc: nc, token: tok}
	var put osv1.PutObjectResponse
	c.call(protocol.OpPutObject, &osv1.PutObjectRequest{Prefix: "papers", Key: "2024/q1/january.pdf", Content: []byte("x")}, &put)
	c.call(protocol.OpPutObject, &osv1.PutObjectRequest{Prefix: "papers/2024", Key: "notes.txt", Content: []byte("y")}, &put)

	var list osv1.ListObjectsResponse
	if r := c.call(protocol.OpListObjects, &osv1.ListObjectsRequest{Prefix: "papers"}, &list); !bytes.Equal(r.Data, []byte{0x0a, 0x00}) || list.GetError() != nil {
		t.Errorf("list_objects of a prefix with objects only deeper: %x (%v), want 0a 00 (keys set, empty)", r.Data, list.GetError())
	}
	var rec osv1.ListObjectsRecursiveResponse
	r := c.call(protocol.OpListObjectsRecursive, &osv1.ListObjectsRecursiveRequest{Prefix: "papers"}, &rec)
	want := &osv1.ListObjectsRecursiveResponse{Result: &osv1.ListObjectsRecursiveResponse_Keys{Keys: &osv1.Keys{Keys: []string{"2024/notes.txt", "2024/q1/january.pdf"}}}}
	if wb, _ := marshal(want); !bytes.Equal(r.Data, wb) {
		t.Errorf("list_objects_recursive papers: %x (%v), want %x", r.Data, &rec, wb)
	}
	r = c.call(protocol.OpListObjectsRecursive, &osv1.ListObjectsRecursiveRequest{Prefix: "nothing"}, &rec)
	c.wantCode("list_objects_recursive of a prefix with nothing", r, &rec, protocol.ObjectNotFound)

	var del osv1.DeleteObjectResponse
	c.call(protocol.OpDeleteObject, &osv1.DeleteObjectRequest{Prefix: "papers", Key: "2024/q1/january.pdf"}, &del)
	c.call(protocol.OpDeleteObject, &osv1.DeleteObjectRequest{Prefix: "papers", Key: "2024/notes.txt"}, &del)
	r = c.call(protocol.OpListObjects, &osv1.ListObjectsRequest{Prefix: "papers"}, &list)
	c.wantCode("list_objects once everything is deleted", r, &list, protocol.ObjectNotFound)
	r = c.call(protocol.OpListObjectsRecursive, &osv1.ListObjectsRecursiveRequest{Prefix: "papers"}, &rec)
	c.wantCode("list_objects_recursive once everything is deleted", r, &rec, protocol.ObjectNotFound)
	r = c.call(protocol.OpListObjectsRecursive, &osv1.ListObjectsRecursiveRequest{Prefix: "a//b"}, &rec)
	c.wantCode("list_objects_recursive of an invalid prefix", r, &rec, protocol.InvalidArgument)
}

func marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}
