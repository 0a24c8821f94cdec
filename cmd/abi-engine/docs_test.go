package main

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/abi-engine/engine/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestOperationsDocNamesRealMetrics keeps the alerting advice of docs/operations.md true:
// every abi_engine_ metric it names is one the engine registers.
func TestOperationsDocNamesRealMetrics(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\babi_engine_[a-z_]*[a-z]`).FindAllString(string(doc), -1)
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) < 5 {
		t.Fatalf("docs/operations.md names %d metrics: %v", len(names), names)
	}
	eng, err := newEngine(config.Default(), zap.NewNop(), "v0.0.0-test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := eng.Registry()
	for _, name := range names {
		if name == "abi_engine_stores" { // the PostgreSQL table of store ids, not a metric
			continue
		}
		// A registry refuses a second collector under a name it already holds, so a probe
		// that registers finds a name the engine does not have.
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "docs probe"})
		if err := reg.Register(probe); err == nil {
			reg.Unregister(probe)
			t.Errorf("docs/operations.md names %s, which the engine does not register", name)
		}
	}
}
