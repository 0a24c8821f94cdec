package client

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// ObjectMetadata describes a stored object: its size in bytes and when it was last
// written. It is the protocol's type, which the engine's backends return too.
type ObjectMetadata = protocol.ObjectMetadata

// ObjectStorage is the typed client of the object_storage service, with the method set of
// the engine's object storage backends. Errors are *CallError values wrapping a
// *protocol.Error; a missing object is protocol.ErrNotFound.
//
// Objects of any size up to the Transport's transfer limit (WithMaxTransferBytes) work:
// PutObject sends an object whose request does not fit one broker message through the
// transfer operation "put", and GetObject takes a reply the engine parked for being too
// large, or downloads the object through the transfer operation "get" when the engine
// could not park it.
type ObjectStorage struct{ t *Transport }

// NewObjectStorage returns an object_storage client over t.
func NewObjectStorage(t *Transport) *ObjectStorage { return &ObjectStorage{t: t} }

// PutObject stores content under prefix/key, replacing what was there. An object whose
// put_object request does not fit one broker message goes by transfer (Transport.Upload).
func (c *ObjectStorage) PutObject(ctx context.Context, prefix, key string, content []byte) error {
	if err := c.t.checkNames(protocol.ObjectStorage, protocol.OpPutObject, "prefix", prefix, "key", key); err != nil {
		return err
	}
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
	header, onDemand := c.t.overflowFor(protocol.ObjectStorage, protocol.OpPutObject)
	msg := nats.Msg{Data: body, Header: header}
	if limit := c.t.MaxPayload(); limit > 0 && int64(msg.Size()) > limit {
		_, err := c.t.Upload(ctx, protocol.TransferPrefix(protocol.ObjectStorage), protocol.OpTransferPut, protocol.ObjectTransfer{Prefix: prefix, Key: key}, nonNil(content))
		return err
	}
	return c.t.send(ctx, subject, body, header, onDemand, nil)
}

// GetObject returns the content of prefix/key. A reply too large for one message
// arrives parked and is fetched (Transport.Request); if the engine answers
// PAYLOAD_TOO_LARGE instead (it could not park it), the object is downloaded by
// transfer, as DownloadObject does.
func (c *ObjectStorage) GetObject(ctx context.Context, prefix, key string) ([]byte, error) {
	if err := c.t.checkNames(protocol.ObjectStorage, protocol.OpGetObject, "prefix", prefix, "key", key); err != nil {
		return nil, err
	}
	ctx, cancel := c.t.bound(ctx)
	defer cancel()
	var r protocol.GetObjectReply
	err := c.t.call(ctx, protocol.ObjectStorage, protocol.OpGetObject, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.ObjectRequest{Ctx: protocol.CtxOf(&rc), Prefix: prefix, Key: key}.AppendJSON(b)
	}, &r)
	var ce *CallError
	if errors.As(err, &ce) && ce.Err.Code == protocol.PayloadTooLarge && ce.Cause == nil {
		// The engine refused to send it in one message: get_object only reads, so
		// reading it again by transfer is safe. A refusal by this client's own limit
		// (Cause errOverLimit) would only be repeated.
		return c.DownloadObject(ctx, prefix, key)
	}
	if err != nil {
		return nil, err
	}
	return nonNil(r.Content), nil
}

// DownloadObject returns the content of prefix/key through the transfer operation
// "get" (Transport.Download), whatever its size: for callers that know an object is too
// large for one message, it saves GetObject's first attempt.
func (c *ObjectStorage) DownloadObject(ctx context.Context, prefix, key string) ([]byte, error) {
	if err := c.t.checkNames(protocol.ObjectStorage, protocol.OpGetObject, "prefix", prefix, "key", key); err != nil {
		return nil, err
	}
	return c.t.Download(ctx, protocol.TransferPrefix(protocol.ObjectStorage), protocol.OpTransferGet, protocol.ObjectTransfer{Prefix: prefix, Key: key})
}

// DeleteObject removes prefix/key.
func (c *ObjectStorage) DeleteObject(ctx context.Context, prefix, key string) error {
	if err := c.t.checkNames(protocol.ObjectStorage, protocol.OpDeleteObject, "prefix", prefix, "key", key); err != nil {
		return err
	}
	return c.t.call(ctx, protocol.ObjectStorage, protocol.OpDeleteObject, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.ObjectRequest{Ctx: protocol.CtxOf(&rc), Prefix: prefix, Key: key}.AppendJSON(b)
	}, nil)
}

// ListObjects returns the keys stored directly under prefix.
func (c *ObjectStorage) ListObjects(ctx context.Context, prefix string) ([]string, error) {
	return c.list(ctx, protocol.OpListObjects, prefix)
}

// ListObjectsRecursive returns every object under prefix at any depth, named relative
// to it ("k", "a/b/k").
func (c *ObjectStorage) ListObjectsRecursive(ctx context.Context, prefix string) ([]string, error) {
	return c.list(ctx, protocol.OpListObjectsRecursive, prefix)
}

func (c *ObjectStorage) list(ctx context.Context, op, prefix string) ([]string, error) {
	if err := c.t.checkNames(protocol.ObjectStorage, op, "prefix", prefix); err != nil {
		return nil, err
	}
	var r protocol.ListObjectsReply
	err := c.t.call(ctx, protocol.ObjectStorage, op, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.ListObjectsRequest{Ctx: protocol.CtxOf(&rc), Prefix: prefix}.AppendJSON(b)
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
	if err := c.t.checkNames(protocol.ObjectStorage, protocol.OpGetObjectMetadata, "prefix", prefix, "key", key); err != nil {
		return ObjectMetadata{}, err
	}
	var r protocol.ObjectMetadataReply
	subject := protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpGetObjectMetadata)
	err := c.t.call(ctx, protocol.ObjectStorage, protocol.OpGetObjectMetadata, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.ObjectRequest{Ctx: protocol.CtxOf(&rc), Prefix: prefix, Key: key}.AppendJSON(b)
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
