package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/internal/telemetry"
	"github.com/abi-engine/engine/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProviderExportsOverOTLPHTTP: a provider built from the telemetry settings sends
// the engine's spans to the collector at the endpoint, in OTLP over HTTP.
func TestProviderExportsOverOTLPHTTP(t *testing.T) {
	got := make(chan string, 10)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + " " + string(body)
	}))
	defer collector.Close()
	for _, endpoint := range []string{strings.TrimPrefix(collector.URL, "http://"), collector.URL + "/v1/traces"} {
		tp, err := telemetry.NewProvider(telemetry.Settings{Endpoint: endpoint, Insecure: true, SampleRatio: 1,
			ServiceName: "abi-engine-test", Version: "v1.2.3"})
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer(telemetry.Scope).Start(context.Background(), "keyvalue.get", trace.WithSpanKind(trace.SpanKindServer))
		span.End()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := tp.Shutdown(ctx); err != nil { // sends the batch
			t.Fatalf("endpoint %s: shutdown: %v", endpoint, err)
		}
		cancel()
		req := testwait.Recv(t, got, 10*time.Second, "the collector's request")
		for _, want := range []string{"POST /v1/traces application/x-protobuf", "keyvalue.get", "abi-engine-test", "v1.2.3"} {
			if !strings.Contains(req, want) {
				t.Errorf("endpoint %s: the collector got %q, which lacks %q", endpoint, req[:min(len(req), 200)], want)
			}
		}
	}
}

func TestSampleRatioZeroRecordsNothingStartedHere(t *testing.T) {
	tp, err := telemetry.NewProvider(telemetry.Settings{Endpoint: "127.0.0.1:1", Insecure: true, SampleRatio: 0, ServiceName: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background()) //nolint:errcheck // nothing was recorded
	_, span := tp.Tracer(telemetry.Scope).Start(context.Background(), "root")
	if span.IsRecording() {
		t.Error("a root span is recorded at sample_ratio 0")
	}
	span.End()
}
