package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// ObjectMetadata describes a stored object: its size in bytes and when it was last
// written. It is the protocol's type, which the engine's backends return too.
type ObjectMetadata = protocol.ObjectMetadata

// ObjectStorage is the typed client of the object_storage service, with the method set of
// the engine's object storage backends. Errors are *CallError values wrapping a
// *protocol.Error; a missing object is protocol.ErrNotFound.
//
// An object whose request does not fit one broker message is refused with
// PAYLOAD_TOO_LARGE before anything is sent; objects that large travel by the transfer
// protocol, which this client does not speak yet.
type ObjectStorage struct{ t *Transport }

// NewObjectStorage returns an object_storage client over t.
func NewObjectStorage(t *Transport) *ObjectStorage { return &ObjectStorage{t: t} }

// PutObject stores content under prefix/key, replacing what was there.
func (c *ObjectStorage) PutObject(ctx context.Context, prefix, key string, content []byte) error {
	ctx, cancel := c.t.bound(ctx)
	defer cancel()
	subject := protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpPutObject)
	body, err := json.Marshal(protocol.PutObjectRequest{
		Ctx: protocol.Ctx{Context: requestContext(ctx)}, Prefix: prefix, Key: key, Content: nonNil(content),
	})
	if err != nil {
		c.t.counters.calls.Add(1)
		return c.t.failed(&CallError{Subject: subject, Err: protocol.Errorf(protocol.InvalidArgument, "encode object %q/%q: %v", prefix, key, err), Cause: err})
	}
	// The one place where a large object would switch to a transfer.
	if limit := c.t.MaxPayload(); limit > 0 && int64(len(body)) > limit {
		c.t.counters.calls.Add(1)
		return c.t.failed(&CallError{Subject: subject, Err: protocol.Errorf(protocol.PayloadTooLarge,
			"object %q/%q of %d bytes encodes to %d bytes, more than the broker's max payload of %d bytes",
			prefix, key, len(content), len(body), limit)})
	}
	return c.t.send(ctx, subject, body, nil)
}

// GetObject returns the content of prefix/key.
func (c *ObjectStorage) GetObject(ctx context.Context, prefix, key string) ([]byte, error) {
	var r protocol.GetObjectReply
	err := c.t.call(ctx, protocol.ObjectStorage, protocol.OpGetObject, func(rc *protocol.RequestContext) any {
		return protocol.ObjectRequest{Ctx: protocol.Ctx{Context: rc}, Prefix: prefix, Key: key}
	}, &r)
	if err != nil {
		return nil, err
	}
	return nonNil(r.Content), nil
}

// DeleteObject removes prefix/key.
func (c *ObjectStorage) DeleteObject(ctx context.Context, prefix, key string) error {
	return c.t.call(ctx, protocol.ObjectStorage, protocol.OpDeleteObject, func(rc *protocol.RequestContext) any {
		return protocol.ObjectRequest{Ctx: protocol.Ctx{Context: rc}, Prefix: prefix, Key: key}
	}, nil)
}

// ListObjects returns the keys stored under prefix.
func (c *ObjectStorage) ListObjects(ctx context.Context, prefix string) ([]string, error) {
	var r protocol.ListObjectsReply
	err := c.t.call(ctx, protocol.ObjectStorage, protocol.OpListObjects, func(rc *protocol.RequestContext) any {
		return protocol.ListObjectsRequest{Ctx: protocol.Ctx{Context: rc}, Prefix: prefix}
	}, &r)
	if err != nil {
		return nil, err
	}
	if r.Keys == nil {
		r.Keys = []string{}
	}
	return r.Keys, nil
}

// GetObjectMetadata returns the size and modification time of prefix/key.
func (c *ObjectStorage) GetObjectMetadata(ctx context.Context, prefix, key string) (ObjectMetadata, error) {
	var r protocol.ObjectMetadataReply
	subject := protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpGetObjectMetadata)
	err := c.t.call(ctx, protocol.ObjectStorage, protocol.OpGetObjectMetadata, func(rc *protocol.RequestContext) any {
		return protocol.ObjectRequest{Ctx: protocol.Ctx{Context: rc}, Prefix: prefix, Key: key}
	}, &r)
	if err != nil {
		return ObjectMetadata{}, err
	}
	at, err := time.Parse(time.RFC3339Nano, r.ModifiedAt)
	if err != nil {
		return ObjectMetadata{}, c.t.failed(&CallError{Subject: subject, Err: protocol.Errorf(protocol.Internal,
			"metadata of object %q/%q: modified_at %q is not RFC 3339: %v", prefix, key, r.ModifiedAt, err), Cause: err})
	}
	return ObjectMetadata{Size: r.Size, ModifiedAt: at.UTC()}, nil
}
