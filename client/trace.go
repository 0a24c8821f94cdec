package client

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/internal/traceprop"
)

// tracerScope is the instrumentation scope of the SDK's spans.
const tracerScope = "github.com/abi-engine/engine/client"

// WithTracerProvider makes a client span of every Request (named after the subject,
// resends included) and sends its context to the engine as a W3C traceparent, so the
// engine's span of the call is its child. Without it a Request still carries the
// caller's span context, when ctx has one, and starts none of its own.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(t *Transport) { t.tracer = tp.Tracer(tracerScope) }
}

// noTrace ends a request that carries no trace.
func noTrace(string, *CallError) {}

// trace starts the request's span, when the transport has a tracer, and returns the
// headers that carry the trace context to the engine, and the function that ends the
// span with the request's outcome.
func (t *Transport) trace(ctx context.Context, subject string, headers nats.Header) (context.Context, nats.Header, func(string, *CallError)) {
	if t.tracer == nil {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return ctx, headers, noTrace
		}
		return ctx, traceprop.Inject(ctx, headers), noTrace
	}
	ctx, span := t.tracer.Start(ctx, subject, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", subject)))
	return ctx, traceprop.Inject(ctx, headers), func(instance string, ce *CallError) {
		switch {
		case ce != nil:
			span.SetAttributes(attribute.String("abi.code", string(ce.Err.Code)))
			if ce.Instance != "" {
				span.SetAttributes(attribute.String("abi.instance", ce.Instance))
			}
			span.SetStatus(codes.Error, ce.Error())
		default:
			span.SetAttributes(attribute.String("abi.code", "OK"), attribute.String("abi.instance", instance))
		}
		span.End()
	}
}
