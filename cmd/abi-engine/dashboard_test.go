package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/abi-engine/engine/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// dashboardPath is the Grafana dashboard of the engine's metrics.
const dashboardPath = "../../deploy/grafana/abi-engine.json"

type grafanaDashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardQueriesRealMetrics: every abi_engine_ metric a panel of the dashboard
// queries is one the engine registers (a histogram by its _bucket, _sum or _count
// series), and the panels cover what operators watch.
func TestDashboardQueriesRealMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardPath, err)
	}
	metric := regexp.MustCompile(`\babi_engine_[a-z_]*[a-z]`)
	var names, titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			found := metric.FindAllString(tg.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: %q queries no engine metric", p.Title, tg.Expr)
			}
			names = append(names, found...)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	eng, err := newEngine(config.Default(), zap.NewNop(), "v0.0.0-test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := eng.Registry()
	for _, name := range names {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		// A registry refuses a second collector under a name it already holds, so a
		// probe that registers finds a name the engine does not have.
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: base, Help: "dashboard probe"})
		if err := reg.Register(probe); err == nil {
			reg.Unregister(probe)
			t.Errorf("the dashboard queries %s, which the engine does not register", name)
		}
	}
	for _, want := range []string{"Lease state per instance", "Lease renewals", "Fences", "Handover phase", "Requests by code", "latency percentiles", "In-flight calls"} {
		if !slices.ContainsFunc(titles, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no panel about %q among %q", want, titles)
		}
	}
}
