package enginemetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/abi-engine/engine/protocol"
	"go.uber.org/zap"
)

// The observer of one operation counts each call under its code and times it, holding
// its metric handles, and allocates nothing; a code the protocol does not have is still
// counted, by its label. (That it is faster than a lookup by label per call is
// BenchmarkCallObserver's to show.)
func TestCallObserverCountsWithCachedHandles(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, false, "dev", zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	observe := m.Call(protocol.KeyValue, protocol.OpGet)
	observe("", time.Millisecond) // the first call of a code makes its counter
	observe(protocol.NotFound, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { observe("", time.Millisecond) }); n != 0 {
		t.Errorf("an answered call allocates %v times, want 0", n)
	}
	observe(protocol.NotFound, time.Millisecond)
	observe("SOMETHING_ELSE", time.Millisecond)
	got := map[string]float64{}
	var durations uint64
	only := prometheus.NewRegistry() // without the collector that asks the engine
	only.MustRegister(m.requests, m.requestSeconds)
	mfs, err := only.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch mf.GetName() {
			case "abi_engine_requests_total":
				for _, l := range mt.GetLabel() {
					if l.GetName() == "code" {
						got[l.GetValue()] = mt.GetCounter().GetValue()
					}
				}
			case "abi_engine_request_duration_seconds":
				durations += mt.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]float64{"OK": 102, "NOT_FOUND": 2, "SOMETHING_ELSE": 1}
	if len(got) != len(want) {
		t.Errorf("request series %v, want %v (none for codes never answered)", got, want)
	}
	for code, n := range want {
		if got[code] != n {
			t.Errorf("requests{code=%s} = %v, want %v", code, got[code], n)
		}
	}
	if durations != 105 {
		t.Errorf("%d durations observed, want 105", durations)
	}
}

// BenchmarkCallObserver compares the observer holding its handles ("cached") with a
// lookup by label values on every call ("lookup"), as the engine did before.
func BenchmarkCallObserver(b *testing.B) {
	m, err := New(prometheus.NewRegistry(), false, "dev", zap.NewNop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cached", func(b *testing.B) {
		observe := m.Call(protocol.KeyValue, protocol.OpGet)
		for b.Loop() {
			observe("", time.Millisecond)
		}
	})
	b.Run("lookup", func(b *testing.B) {
		for b.Loop() {
			m.requests.WithLabelValues(protocol.KeyValue, protocol.OpGet, "OK").Inc()
			m.requestSeconds.WithLabelValues(protocol.KeyValue, protocol.OpGet).Observe(time.Millisecond.Seconds())
		}
	})
}
