package engine_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/telemetry"
	"github.com/abi-engine/engine/protocol"
)

// tracedEngine is a serving engine whose spans, and those of tp's users, go to the
// returned in-memory exporter.
func tracedEngine(t *testing.T, adapters string) (string, *engine.Engine, *sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv := natstest.Start(t)
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", adapters), engine.WithTracerProvider(tp))
	load(t, e)
	return srv.URL(), e, tp, exp
}

func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var names []string
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			return s
		}
		names = append(names, s.Name)
	}
	t.Fatalf("no span %q among %q", name, names)
	return tracetest.SpanStub{}
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

func TestTraceStartedBySDKContinuesOnTheEngine(t *testing.T) {
	url, e, tp, exp := tracedEngine(t, "jetstream")
	tr, err := client.NewTransport(natstest.Connect(t, url), client.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.NewKeyValue(tr).Set(context.Background(), "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}

	sdk := spanNamed(t, exp, protocol.ServiceSubject(protocol.KeyValue, "set"))
	call := spanNamed(t, exp, "keyvalue.set")
	backend := spanNamed(t, exp, "keyvalue backend Set")
	if sdk.SpanKind != trace.SpanKindClient || call.SpanKind != trace.SpanKindServer {
		t.Errorf("kinds: sdk %s, engine %s", sdk.SpanKind, call.SpanKind)
	}
	if call.Parent.SpanID() != sdk.SpanContext.SpanID() || call.SpanContext.TraceID() != sdk.SpanContext.TraceID() || !call.Parent.IsRemote() {
		t.Errorf("the engine's span %s has parent %s, want the SDK's span %s (remote)", call.SpanContext.SpanID(), call.Parent.SpanID(), sdk.SpanContext.SpanID())
	}
	if backend.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Errorf("the backend's span has parent %s, want the engine's call span %s", backend.Parent.SpanID(), call.SpanContext.SpanID())
	}
	for key, want := range map[attribute.Key]string{
		telemetry.AttrService: "keyvalue", telemetry.AttrOperation: "set", telemetry.AttrCode: "OK",
		telemetry.AttrInstance: e.InstanceID(),
	} {
		if got := attr(call, key).AsString(); got != want {
			t.Errorf("engine span %s = %q, want %q", key, got, want)
		}
	}
	if got := attr(call, telemetry.AttrEpoch).AsInt64(); got != int64(e.Epoch()) || got < 1 {
		t.Errorf("engine span abi.epoch = %d, engine epoch %d", got, e.Epoch())
	}
	if got := attr(backend, telemetry.AttrBackend).AsString(); got != "jetstream" {
		t.Errorf("backend span abi.backend = %q", got)
	}
	if got := attr(sdk, "abi.instance").AsString(); got != e.InstanceID() {
		t.Errorf("sdk span abi.instance = %q, want %s", got, e.InstanceID())
	}
}

func TestTraceOfTheCallerCarriesWithoutSDKTracer(t *testing.T) {
	url, _, tp, exp := tracedEngine(t, "memory")
	ctx, parent := tp.Tracer("app").Start(context.Background(), "app work")
	// A transport without a tracer propagates the caller's span and starts none.
	_, _, err := client.NewKeyValue(transport(t, url)).Get(ctx, "k")
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	call := spanNamed(t, exp, "keyvalue.get")
	if call.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("the engine's span has parent %s, want the caller's %s", call.Parent.SpanID(), parent.SpanContext().SpanID())
	}
	if n := len(exp.GetSpans()); n != 3 { // app work, keyvalue.get, its backend call
		t.Errorf("%d spans, want 3: %v", n, exp.GetSpans())
	}
}

func TestTraceIDOfThePayloadNamesTheTrace(t *testing.T) {
	url, _, _, exp := tracedEngine(t, "memory")
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := transport(t, url).Request(ctx, protocol.ServiceSubject(protocol.KeyValue, "set"),
		[]byte(`{"key":"","value":"","context":{"trace_id":"`+id+`"}}`), nil)
	if protocol.CodeOf(err) != protocol.InvalidArgument {
		t.Fatalf("set with an empty key: %v, want INVALID_ARGUMENT", err)
	}
	call := spanNamed(t, exp, "keyvalue.set")
	if got := call.SpanContext.TraceID().String(); got != id || call.Parent.IsValid() {
		t.Errorf("the engine's span is in trace %s with parent %v, want trace %s as a root", got, call.Parent.IsValid(), id)
	}
	if got := attr(call, telemetry.AttrTraceID).AsString(); got != id {
		t.Errorf("abi.trace_id = %q", got)
	}
	if call.Status.Code != codes.Error || attr(call, telemetry.AttrCode).AsString() != "INVALID_ARGUMENT" {
		t.Errorf("status %v, code %q", call.Status, attr(call, telemetry.AttrCode).AsString())
	}
}
