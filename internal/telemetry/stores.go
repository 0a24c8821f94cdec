package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// backend starts the client spans of one backend's calls, as children of the call's
// span: a backend call outside a traced call (a probe, a transfer session) makes none.
type backend struct {
	tracer           trace.Tracer
	service, adapter string
}

func (b backend) start(ctx context.Context, method string) (context.Context, func(error)) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, func(error) {}
	}
	ctx, span := b.tracer.Start(ctx, b.service+" backend "+method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrService.String(b.service), AttrBackend.String(b.adapter)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// KeyValue returns store with a span for every call, named after the adapter.
func KeyValue(store keyvalue.Store, tp trace.TracerProvider, adapter string) keyvalue.Store {
	return tracedKeyValue{Store: store, b: backend{tracer: tp.Tracer(Scope), service: protocol.KeyValue, adapter: adapter}}
}

type tracedKeyValue struct {
	keyvalue.Store
	b backend
}

func (s tracedKeyValue) Get(ctx context.Context, key string) (v []byte, found bool, err error) {
	ctx, end := s.b.start(ctx, "Get")
	defer func() { end(err) }()
	return s.Store.Get(ctx, key)
}

func (s tracedKeyValue) Set(ctx context.Context, key string, value []byte, ttl time.Duration) (err error) {
	ctx, end := s.b.start(ctx, "Set")
	defer func() { end(err) }()
	return s.Store.Set(ctx, key, value, ttl)
}

func (s tracedKeyValue) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (set bool, err error) {
	ctx, end := s.b.start(ctx, "SetIfNotExists")
	defer func() { end(err) }()
	return s.Store.SetIfNotExists(ctx, key, value, ttl)
}

func (s tracedKeyValue) Delete(ctx context.Context, key string) (deleted bool, err error) {
	ctx, end := s.b.start(ctx, "Delete")
	defer func() { end(err) }()
	return s.Store.Delete(ctx, key)
}

func (s tracedKeyValue) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (deleted bool, err error) {
	ctx, end := s.b.start(ctx, "DeleteIfValueMatches")
	defer func() { end(err) }()
	return s.Store.DeleteIfValueMatches(ctx, key, value)
}

func (s tracedKeyValue) Exists(ctx context.Context, key string) (exists bool, err error) {
	ctx, end := s.b.start(ctx, "Exists")
	defer func() { end(err) }()
	return s.Store.Exists(ctx, key)
}

func (s tracedKeyValue) ListKeys(ctx context.Context, prefix, after string, limit int) (keys []string, more bool, err error) {
	ctx, end := s.b.start(ctx, "ListKeys")
	defer func() { end(err) }()
	return s.Store.ListKeys(ctx, prefix, after, limit)
}

func (s tracedKeyValue) TTL(ctx context.Context, key string) (ttl time.Duration, found bool, err error) {
	ctx, end := s.b.start(ctx, "TTL")
	defer func() { end(err) }()
	return s.Store.TTL(ctx, key)
}

// ObjectStorage returns store with a span for every call, named after the adapter.
func ObjectStorage(store objectstorage.Store, tp trace.TracerProvider, adapter string) objectstorage.Store {
	return tracedObjects{Store: store, b: backend{tracer: tp.Tracer(Scope), service: protocol.ObjectStorage, adapter: adapter}}
}

type tracedObjects struct {
	objectstorage.Store
	b backend
}

func (s tracedObjects) PutObject(ctx context.Context, prefix, key string, content []byte) (err error) {
	ctx, end := s.b.start(ctx, "PutObject")
	defer func() { end(err) }()
	return s.Store.PutObject(ctx, prefix, key, content)
}

func (s tracedObjects) GetObject(ctx context.Context, prefix, key string) (content []byte, err error) {
	ctx, end := s.b.start(ctx, "GetObject")
	defer func() { end(err) }()
	return s.Store.GetObject(ctx, prefix, key)
}

func (s tracedObjects) DeleteObject(ctx context.Context, prefix, key string) (err error) {
	ctx, end := s.b.start(ctx, "DeleteObject")
	defer func() { end(err) }()
	return s.Store.DeleteObject(ctx, prefix, key)
}

func (s tracedObjects) ListObjects(ctx context.Context, prefix string) (keys []string, err error) {
	ctx, end := s.b.start(ctx, "ListObjects")
	defer func() { end(err) }()
	return s.Store.ListObjects(ctx, prefix)
}

func (s tracedObjects) ListObjectsRecursive(ctx context.Context, prefix string) (keys []string, err error) {
	ctx, end := s.b.start(ctx, "ListObjectsRecursive")
	defer func() { end(err) }()
	return s.Store.ListObjectsRecursive(ctx, prefix)
}

func (s tracedObjects) GetObjectMetadata(ctx context.Context, prefix, key string) (md objectstorage.Metadata, err error) {
	ctx, end := s.b.start(ctx, "GetObjectMetadata")
	defer func() { end(err) }()
	return s.Store.GetObjectMetadata(ctx, prefix, key)
}
