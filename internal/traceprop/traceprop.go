// Package traceprop carries a W3C trace context (traceparent, tracestate) in NATS
// headers, for the SDK that sends a request and the engine that serves it. It needs
// only the OpenTelemetry API, so the SDK carries no exporter with it.
//
// NATS headers keep the case of their keys (unlike HTTP's), so the keys are written
// and read exactly as W3C spells them: lowercase.
package traceprop

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// W3C is the propagator of both sides: W3C trace context, no baggage.
var w3c propagation.TraceContext

// Carrier is a propagation.TextMapCarrier over NATS headers.
type Carrier nats.Header

var _ propagation.TextMapCarrier = Carrier(nil)

// Get returns the first value of key, "" when there is none.
func (c Carrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces key's values with value.
func (c Carrier) Set(key, value string) { c[key] = []string{value} }

// Keys are the header keys.
func (c Carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject returns headers with ctx's span context added as traceparent (and
// tracestate), or headers as they are when ctx carries none. The caller's map is never
// written: it may be shared between requests.
func Inject(ctx context.Context, headers nats.Header) nats.Header {
	out := make(nats.Header, len(headers)+2)
	for k, v := range headers {
		out[k] = v
	}
	w3c.Inject(ctx, Carrier(out))
	if _, ok := out["traceparent"]; !ok {
		return headers
	}
	return out
}

// Extract returns ctx with the remote span context of headers' traceparent, when they
// carry a valid one.
func Extract(ctx context.Context, headers nats.Header) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, Carrier(headers))
}
