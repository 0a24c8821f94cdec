package objectstorage

// The object_storage protobuf contract (package abi.object_storage.v1), served beside
// the JSON one on the same subjects. Where it differs from JSON the Python clients
// expect it: a missing object is OBJECT_NOT_FOUND, a key may hold "/" (its leading
// segments join the prefix), a listing with nothing under the prefix is
// OBJECT_NOT_FOUND, and metadata is an ObjectMetaData naming the object, not a path
// on this host.

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/abi-engine/engine/primaries"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	"github.com/abi-engine/engine/protocol"
)

// protobufOps is the protobuf side of every operation of the service.
func (h handler) protobufOps() map[string]primaries.ProtoOperation {
	get := primaries.HandleProtoEncoded(func() *osv1.GetObjectRequest { return new(osv1.GetObjectRequest) }, h.pbGet,
		func(e *commonv1.CallError) *osv1.GetObjectResponse {
			return &osv1.GetObjectResponse{Result: &osv1.GetObjectResponse_Error{Error: e}}
		})
	list := primaries.HandleProto(func() *osv1.ListObjectsRequest { return new(osv1.ListObjectsRequest) }, h.pbList,
		func(e *commonv1.CallError) *osv1.ListObjectsResponse {
			return &osv1.ListObjectsResponse{Result: &osv1.ListObjectsResponse_Error{Error: e}}
		})
	md := primaries.HandleProto(func() *osv1.GetObjectMetadataRequest { return new(osv1.GetObjectMetadataRequest) }, h.pbMetadata,
		func(e *commonv1.CallError) *osv1.GetObjectMetadataResponse {
			return &osv1.GetObjectMetadataResponse{Result: &osv1.GetObjectMetadataResponse_Error{Error: e}}
		})
	recursive := primaries.HandleProto(func() *osv1.ListObjectsRecursiveRequest { return new(osv1.ListObjectsRecursiveRequest) }, h.pbListRecursive,
		func(e *commonv1.CallError) *osv1.ListObjectsRecursiveResponse {
			return &osv1.ListObjectsRecursiveResponse{Result: &osv1.ListObjectsRecursiveResponse_Error{Error: e}}
		})
	for _, op := range []*primaries.ProtoOperation{&get, &list, &recursive, &md} {
		op.Run = primaries.ReadOnly(op.Run)
	}
	return map[string]primaries.ProtoOperation{
		protocol.OpGetObject:            get,
		protocol.OpListObjects:          list,
		protocol.OpListObjectsRecursive: recursive,
		protocol.OpGetObjectMetadata:    md,
		protocol.OpPutObject: primaries.HandleProto(func() *osv1.PutObjectRequest { return new(osv1.PutObjectRequest) }, h.pbPut,
			func(e *commonv1.CallError) *osv1.PutObjectResponse { return &osv1.PutObjectResponse{Error: e} }),
		protocol.OpDeleteObject: primaries.HandleProto(func() *osv1.DeleteObjectRequest { return new(osv1.DeleteObjectRequest) }, h.pbDelete,
			func(e *commonv1.CallError) *osv1.DeleteObjectResponse { return &osv1.DeleteObjectResponse{Error: e} }),
	}
}

// SplitKey is the prefix and key a name of the Python clients stands for: a key
// "a/b/c.txt" under prefix "p" is the key "c.txt" under "p/a/b". Each segment is then
// checked as in JSON (CheckName), so "a//b" or "../x" is still INVALID_ARGUMENT.
func SplitKey(prefix, key string) (string, string) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return prefix, key
	}
	dir := key[:i]
	if prefix != "" {
		dir = prefix + "/" + dir
	}
	return dir, key[i+1:]
}

// pbName checks a protobuf request's name and returns it split (SplitKey).
func pbName(prefix, key string) (string, string, error) {
	prefix, key = SplitKey(prefix, key)
	return prefix, key, CheckName(prefix, key)
}

// pbError is err as the protobuf contract codes it: a missing object is
// OBJECT_NOT_FOUND, with the store's message.
func pbError(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.NotFound {
		return &protocol.Error{Code: protocol.ObjectNotFound, Message: pe.Message, Retryable: pe.Retryable}
	}
	return err
}

func (h handler) pbPut(ctx context.Context, r *osv1.PutObjectRequest) (*osv1.PutObjectResponse, error) {
	prefix, key, err := pbName(r.Prefix, r.Key)
	if err != nil {
		return nil, err
	}
	content := r.Content
	if content == nil {
		content = []byte{}
	}
	if err := h.store.PutObject(ctx, prefix, key, content); err != nil {
		return nil, pbError(err)
	}
	return &osv1.PutObjectResponse{}, nil
}

// pbGet returns the encoded GetObjectResponse: encoded in place when the object was
// read into the reply's buffer (ReadBuffer), else marshalled.
func (h handler) pbGet(ctx context.Context, r *osv1.GetObjectRequest) ([]byte, error) {
	prefix, key, err := pbName(r.Prefix, r.Key)
	if err != nil {
		return nil, err
	}
	ctx, g := withGet(ctx)
	content, err := h.store.GetObject(ctx, prefix, key)
	if err != nil {
		return nil, pbError(err)
	}
	if enc := g.encoded(content); enc != nil {
		return enc, nil
	}
	if content == nil {
		content = []byte{} // set even when empty: a client reads an unset result as "nothing"
	}
	out, err := proto.Marshal(&osv1.GetObjectResponse{Result: &osv1.GetObjectResponse_Content{Content: content}})
	if err != nil {
		return nil, protocol.Errorf(protocol.Internal, "encode the reply: %v", err)
	}
	return out, nil
}

func (h handler) pbDelete(ctx context.Context, r *osv1.DeleteObjectRequest) (*osv1.DeleteObjectResponse, error) {
	prefix, key, err := pbName(r.Prefix, r.Key)
	if err != nil {
		return nil, err
	}
	if err := h.store.DeleteObject(ctx, prefix, key); err != nil {
		return nil, pbError(err)
	}
	return &osv1.DeleteObjectResponse{}, nil
}

// pbList lists the objects directly under the prefix, by key. OBJECT_NOT_FOUND only
// when no object lies under the prefix at any depth, as the Python engine answers a
// prefix that does not exist: a prefix holding only deeper objects exists (its
// listing is keys {}), so the flat and the recursive listing always agree on whether
// the prefix is there.
func (h handler) pbList(ctx context.Context, r *osv1.ListObjectsRequest) (*osv1.ListObjectsResponse, error) {
	if err := CheckPrefix(r.Prefix); err != nil {
		return nil, err
	}
	keys, err := h.store.ListObjects(ctx, r.Prefix)
	if err != nil {
		return nil, pbError(err)
	}
	if len(keys) == 0 {
		deeper, err := h.store.ListObjectsRecursive(ctx, r.Prefix)
		if err != nil {
			return nil, pbError(err)
		}
		if len(deeper) == 0 {
			return nil, noObjectUnder(r.Prefix)
		}
	}
	return &osv1.ListObjectsResponse{Result: &osv1.ListObjectsResponse_Keys{Keys: &osv1.Keys{Keys: keys}}}, nil
}

// pbListRecursive lists every object under the prefix, named relative to it;
// OBJECT_NOT_FOUND when there is none.
func (h handler) pbListRecursive(ctx context.Context, r *osv1.ListObjectsRecursiveRequest) (*osv1.ListObjectsRecursiveResponse, error) {
	if err := CheckPrefix(r.Prefix); err != nil {
		return nil, err
	}
	keys, err := h.store.ListObjectsRecursive(ctx, r.Prefix)
	if err != nil {
		return nil, pbError(err)
	}
	if len(keys) == 0 {
		return nil, noObjectUnder(r.Prefix)
	}
	return &osv1.ListObjectsRecursiveResponse{Result: &osv1.ListObjectsRecursiveResponse_Keys{Keys: &osv1.Keys{Keys: keys}}}, nil
}

func noObjectUnder(prefix string) error {
	return protocol.Errorf(protocol.ObjectNotFound, "no object under prefix %.64q", prefix)
}

// pbMetadata is what the store knows of an object: its name, size and modification
// time; the other optional fields stay unset (unknown). file_path is "<prefix>/<key>",
// a name in the store, never a path on this host.
func (h handler) pbMetadata(ctx context.Context, r *osv1.GetObjectMetadataRequest) (*osv1.GetObjectMetadataResponse, error) {
	prefix, key, err := pbName(r.Prefix, r.Key)
	if err != nil {
		return nil, err
	}
	md, err := h.store.GetObjectMetadata(ctx, prefix, key)
	if err != nil {
		return nil, pbError(err)
	}
	path := key
	if prefix != "" {
		path = prefix + "/" + key
	}
	return &osv1.GetObjectMetadataResponse{Result: &osv1.GetObjectMetadataResponse_Metadata{Metadata: &osv1.ObjectMetaData{
		FilePath:      path,
		FileName:      key,
		FileSizeBytes: md.Size,
		ModifiedTime:  timestamppb.New(md.ModifiedAt),
	}}}, nil
}
