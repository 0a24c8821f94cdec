package telemetry

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/internal/traceprop"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
)

// Calls makes a server span of every call on the engine's primaries
// (primaries.Config.Tracer): named service.operation, with the service, operation,
// code, instance and epoch, the child of the caller's span when the request carries a
// traceparent.
type Calls struct {
	tracer   trace.Tracer
	instance string
	epoch    func() uint64
}

var _ primaries.CallTracer = (*Calls)(nil)

// NewCalls returns the tracer of the calls of the engine instance, whose epoch the
// spans read from epoch as each call starts.
func NewCalls(tp trace.TracerProvider, instance string, epoch func() uint64) *Calls {
	return &Calls{tracer: tp.Tracer(Scope), instance: instance, epoch: epoch}
}

// StartCall starts the call's span.
func (c *Calls) StartCall(ctx context.Context, service, operation string, header nats.Header, data []byte) (context.Context, primaries.CallSpan) {
	ctx = traceprop.Extract(ctx, header)
	payloadID := ""
	if !trace.SpanContextFromContext(ctx).IsValid() {
		payloadID = payloadTraceID(data)
		if id, err := trace.TraceIDFromHex(payloadID); err == nil {
			ctx = withPayloadTrace(ctx, id)
		}
	}
	ctx, span := c.tracer.Start(ctx, service+"."+operation, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(AttrService.String(service), AttrOperation.String(operation),
			AttrInstance.String(c.instance), AttrEpoch.Int64(int64(c.epoch())))
		if payloadID != "" {
			span.SetAttributes(AttrTraceID.String(payloadID))
		}
	}
	return ctx, callSpan{span}
}

type callSpan struct{ span trace.Span }

func (s callSpan) End(code protocol.Code) {
	if code == "" {
		code = "OK"
	} else {
		s.span.SetStatus(codes.Error, string(code))
	}
	s.span.SetAttributes(AttrCode.String(string(code)))
	s.span.End()
}

// payloadTraceID is the payload's context.trace_id, "" when it has none. Only a payload
// that mentions it is decoded.
func payloadTraceID(data []byte) string {
	if !bytes.Contains(data, []byte(`"trace_id"`)) {
		return ""
	}
	var p struct {
		Context protocol.RequestContext `json:"context"`
	}
	if json.Unmarshal(data, &p) != nil {
		return ""
	}
	return p.Context.TraceID
}
