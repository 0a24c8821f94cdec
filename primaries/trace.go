package primaries

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// CallTracer is told of every call a worker takes up, before the lease check, with the
// request's headers and payload (where a caller's trace context is), and returns the
// context the call runs in and the span that ends with the call's answer. Package
// internal/telemetry makes OpenTelemetry spans of it. It runs on the calls'
// goroutines, so it must be safe for concurrent use. A nil Config.Tracer costs one
// comparison per call.
type CallTracer interface {
	StartCall(ctx context.Context, service, operation string, header nats.Header, data []byte) (context.Context, CallSpan)
}

// CallSpan is one call's span: End is called once, as the answer is on its way, with
// the error code ("" when the call succeeded).
type CallSpan interface {
	End(code protocol.Code)
}
