package node

import (
	"github.com/abi-engine/engine/internal/telemetry"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
)

// callTracer is the primaries' tracer, nil when the engine traces nothing.
func (e *Engine) callTracer() primaries.CallTracer {
	if e.opts.Tracer == nil {
		return nil
	}
	return telemetry.NewCalls(e.opts.Tracer, e.InstanceID(), e.Epoch)
}

// tracedKeyValue is kv with a span per backend call when the engine traces.
func (e *Engine) tracedKeyValue(kv keyvalue.Store) keyvalue.Store {
	if e.opts.Tracer == nil {
		return kv
	}
	return telemetry.KeyValue(kv, e.opts.Tracer, string(e.cfg.Services.KeyValue.Adapter))
}

// tracedObjectStorage is objects with a span per backend call when the engine traces.
func (e *Engine) tracedObjectStorage(objects objectstorage.Store) objectstorage.Store {
	if e.opts.Tracer == nil {
		return objects
	}
	return telemetry.ObjectStorage(objects, e.opts.Tracer, string(e.cfg.Services.ObjectStorage.Adapter))
}
