package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// payloadTraceKey carries a trace id from a request's payload (context.trace_id) to the
// IDGenerator, for a call that came without a traceparent.
type payloadTraceKey struct{}

func withPayloadTrace(ctx context.Context, id trace.TraceID) context.Context {
	return context.WithValue(ctx, payloadTraceKey{}, id)
}

// IDGenerator is the SDK's random generator, except that a root span started for a
// call whose payload named a trace (context.trace_id, 32 hex digits) gets that trace
// id: the engine's span then joins the caller's trace though the caller sent no
// traceparent. NewProvider uses it; an embedder with a provider of its own adds it with
// sdktrace.WithIDGenerator, else such a call starts a trace of its own that carries
// the id as the attribute abi.trace_id.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if id, ok := ctx.Value(payloadTraceKey{}).(trace.TraceID); ok && id.IsValid() {
		return id, newSpanID()
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
