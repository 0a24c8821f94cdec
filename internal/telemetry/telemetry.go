// Package telemetry makes the engine's OpenTelemetry traces: a span per call on the
// engine (Calls, the primaries' CallTracer) that continues the caller's W3C
// traceparent or, without one, the trace_id of the payload's context; a child span per
// backend call (KeyValue, ObjectStorage); and the provider that exports them over
// OTLP/HTTP (NewProvider), configured under telemetry: and off by default.
//
// With tracing off the engine gives its primaries no tracer and its backends no
// wrapper, so a call costs what it cost before (BenchmarkKeyValueGet).
package telemetry

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Scope is the instrumentation scope of the engine's spans.
const Scope = "github.com/abi-engine/engine"

// Settings are what NewProvider needs: the telemetry block of the configuration and
// who the engine is.
type Settings struct {
	// Endpoint is host:port or an http(s):// URL of an OTLP/HTTP collector.
	Endpoint string
	// Insecure sends to a host:port endpoint over plain HTTP.
	Insecure bool
	// SampleRatio is the share of the traces started on the engine that are
	// recorded; a caller's sampling decision wins for its own.
	SampleRatio float64
	// ServiceName, Version and InstanceID describe the engine on every span.
	ServiceName, Version, InstanceID string
}

// NewProvider returns a tracer provider exporting to the OTLP/HTTP collector of s in
// batches. The caller shuts it down (Shutdown), which sends what is left. Creating it
// sends nothing: a collector that is away loses spans, never calls.
func NewProvider(s Settings) (*sdktrace.TracerProvider, error) {
	var opts []otlptracehttp.Option
	if strings.HasPrefix(s.Endpoint, "http://") || strings.HasPrefix(s.Endpoint, "https://") {
		opts = append(opts, otlptracehttp.WithEndpointURL(s.Endpoint))
	} else {
		opts = append(opts, otlptracehttp.WithEndpoint(s.Endpoint))
		if s.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter for %s: %w", s.Endpoint, err)
	}
	res := resource.NewSchemaless(
		semconv.ServiceName(s.ServiceName),
		semconv.ServiceVersion(s.Version),
		semconv.ServiceInstanceID(s.InstanceID),
	)
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(5*time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.SampleRatio))),
		sdktrace.WithIDGenerator(IDGenerator()),
	), nil
}

// The attributes of the engine's spans.
const (
	AttrService   = attribute.Key("abi.service")
	AttrOperation = attribute.Key("abi.operation")
	AttrCode      = attribute.Key("abi.code")
	AttrInstance  = attribute.Key("abi.instance")
	AttrEpoch     = attribute.Key("abi.epoch")
	AttrTraceID   = attribute.Key("abi.trace_id") // the payload's context.trace_id, as sent
	AttrBackend   = attribute.Key("abi.backend")
)
