package engine

import (
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/internal/telemetry"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
)

// WithTracerProvider makes a span of every call the engine serves (service, operation,
// code, instance, epoch), the child of the caller's when the request carries a W3C
// traceparent, and a child span of each backend call it makes. Without it the engine
// traces nothing and a call costs nothing more. `abi-engine run` passes the provider
// of the telemetry: block (an OTLP/HTTP exporter); an embedder passes its own.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp == nil {
			o.fail(errors.New("engine: WithTracerProvider: the provider is nil (leave the option out for no traces)"))
			return
		}
		o.tracer = tp
	}
}

// callTracer is the primaries' tracer, nil when the engine traces nothing.
func (e *Engine) callTracer() primaries.CallTracer {
	if e.opts.tracer == nil {
		return nil
	}
	return telemetry.NewCalls(e.opts.tracer, e.InstanceID(), e.Epoch)
}

// tracedKeyValue is kv with a span per backend call when the engine traces.
func (e *Engine) tracedKeyValue(kv keyvalue.Store) keyvalue.Store {
	if e.opts.tracer == nil {
		return kv
	}
	return telemetry.KeyValue(kv, e.opts.tracer, string(e.cfg.Services.KeyValue.Adapter))
}

// tracedObjectStorage is objects with a span per backend call when the engine traces.
func (e *Engine) tracedObjectStorage(objects objectstorage.Store) objectstorage.Store {
	if e.opts.tracer == nil {
		return objects
	}
	return telemetry.ObjectStorage(objects, e.opts.tracer, string(e.cfg.Services.ObjectStorage.Adapter))
}
