package traceprop_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/internal/traceprop"
)

func TestInjectExtractRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	callers := nats.Header{"Abi-Overflow": []string{"1"}}
	h := traceprop.Inject(ctx, callers)
	if got := h["traceparent"]; len(got) != 1 || got[0] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("traceparent %q (NATS keys keep their case: W3C's is lowercase)", got)
	}
	if h.Get("Abi-Overflow") != "1" || len(callers) != 1 {
		t.Errorf("the caller's headers: %v, injected: %v", callers, h)
	}
	got := trace.SpanContextFromContext(traceprop.Extract(context.Background(), h))
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsRemote() || !got.IsSampled() {
		t.Errorf("extracted %+v", got)
	}
}

func TestNoSpanNoHeader(t *testing.T) {
	if h := traceprop.Inject(context.Background(), nil); h != nil {
		t.Errorf("without a span: %v", h)
	}
	if sc := trace.SpanContextFromContext(traceprop.Extract(context.Background(), nats.Header{"traceparent": {"garbage"}})); sc.IsValid() {
		t.Errorf("a bad traceparent gave %+v", sc)
	}
}
