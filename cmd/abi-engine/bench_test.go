package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
)

// servingEngine loads an in-process engine with memory backends against url.
func servingEngine(t *testing.T, url string, with ...func(*config.Config)) *engine.Engine {
	t.Helper()
	cfg := config.Default()
	cfg.NATS.URL = url
	cfg.HTTP.Listen = ""
	cfg.Services.KeyValue.Adapter = config.KeyValueMemory
	cfg.Services.ObjectStorage.Adapter = config.ObjectStorageMemory
	for _, w := range with {
		w(cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Load(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		_ = e.Shutdown(sctx)
	})
	return e
}

func TestBenchAgainstAServingEngine(t *testing.T) {
	srv := natstest.Start(t)
	servingEngine(t, srv.URL())
	out := filepath.Join(t.TempDir(), "report.json")
	r := runCLI(t, nil, "bench", "--nats", srv.URL(), "--count", "200", "--concurrency", "4", "--raw", "--json", out)
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "keyvalue", "engine/raw NATS: throughput", "engine/header echo: throughput", "echo-instance-header")
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Ops        int64 `json:"ops"`
		Mismatches int64 `json:"mismatches"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, data)
	}
	if rep.Ops < 200 || rep.Mismatches != 0 {
		t.Fatalf("report: %+v", rep)
	}
}

// TestBenchJSONOnStandardOutput: with --json - the report is the only thing on
// standard output, as JSON; the table goes to standard error.
func TestBenchJSONOnStandardOutput(t *testing.T) {
	srv := natstest.Start(t)
	servingEngine(t, srv.URL())
	r := runCLI(t, nil, "bench", "--nats", srv.URL(), "--count", "100", "--concurrency", "4", "--json", "-")
	wantCode(t, r, exitOK)
	var rep struct {
		Ops int64 `json:"ops"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Ops < 100 {
		t.Fatalf("bench --json - (%v): %+v\n%s", err, rep, r)
	}
	wantContains(t, "stderr", r.stderr, "keyvalue")
}

// With --rounds the runs repeat, interleaved, and the medians and ranges of both
// ratios come last.
func TestBenchRoundsPrintTheMedians(t *testing.T) {
	srv := natstest.Start(t)
	servingEngine(t, srv.URL())
	r := runCLI(t, nil, "bench", "--nats", srv.URL(), "--workload", "get", "--count", "100", "--concurrency", "4", "--raw", "--rounds", "3")
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "engine/raw NATS over 3 rounds, median (range): throughput ",
		"engine/header echo over 3 rounds, median (range): throughput ")
	wantContains(t, "stderr", r.stderr, "round 1 of 3:", "round 3 of 3:")
	if n := strings.Count(r.stdout, "abi-engine keyvalue get: "); n != 3 {
		t.Fatalf("%d engine runs printed, want 3:\n%s", n, r.stdout)
	}
	// The second round runs the engine first (RoundOrder).
	second := r.stdout[strings.Index(r.stdout, "engine/header echo: throughput"):]
	if e, h := strings.Index(second, "abi-engine keyvalue get: "), strings.Index(second, "raw NATS request/reply: "); e < 0 || h < 0 || e > h {
		t.Fatalf("the second round did not start with the engine:\n%s", r.stdout)
	}
	wantCode(t, runCLI(t, nil, "bench", "--rounds", "0", "--nats", srv.URL()), exitUsage)
}

func TestBenchAndChaosUsage(t *testing.T) {
	wantCode(t, runCLI(t, nil, "bench", "--concurrency", "0", "--nats", "nats://127.0.0.1:1"), exitUsage)
	r := runCLI(t, nil, "chaos", "--scenario", "nope")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "rolling-deploy")
	wantCode(t, runCLI(t, nil, "chaos"), exitUsage)
}

func TestChaosScenarioRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs engines for seconds")
	}
	out := t.TempDir()
	r := runCLI(t, nil, "chaos", "--scenario", "foreign-value", "--seed", "3", "--out", out)
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "foreign-value")
	for _, f := range []string{"report.json", "timeline.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("no %s: %v", f, err)
		}
	}
}

// TestChaosJSON: chaos --json prints the report as JSON, the scenario and its verdict
// in it, instead of the table.
func TestChaosJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs engines for seconds")
	}
	r := runCLI(t, nil, "chaos", "--scenario", "foreign-value", "--seed", "3", "--json")
	wantCode(t, r, exitOK)
	var rep struct {
		Scenario string `json:"scenario"`
		Passed   bool   `json:"passed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Scenario != "foreign-value" || !rep.Passed {
		t.Errorf("chaos --json (%v): %+v\n%s", err, rep, r)
	}
}

// With --raw and a write workload, bench also puts into a scratch bucket shaped like
// the engine's, directly and (keyvalue) through a bare responder, and prints the
// engine's ratio to each and the responder's to the direct put; the scratch buckets
// are gone afterwards.
func TestBenchRawWritesAgainstTheStore(t *testing.T) {
	srv := natstest.Start(t)
	servingEngine(t, srv.URL(), func(c *config.Config) { c.Services.KeyValue.Adapter = config.KeyValueJetStream })
	r := runCLI(t, nil, "bench", "--nats", srv.URL(), "--workload", "set", "--count", "100", "--concurrency", "4", "--raw", "--rounds", "2")
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "engine/direct KV put: throughput", "engine/direct KV put over 2 rounds, median (range): throughput ",
		"engine/KV put proxy: throughput", "KV put proxy/direct KV put: throughput",
		"engine/KV put proxy over 2 rounds, median (range): throughput ", "KV put proxy/direct KV put over 2 rounds, median (range): throughput ")
	wantContains(t, "stderr", r.stderr, "direct JetStream KV put into a scratch bucket shaped like ABI_KV:",
		"JetStream KV put through a bare responder (a micro endpoint that puts and replies) into a scratch bucket shaped like ABI_KV:")
	if strings.Contains(r.stdout, "ABI_BENCH_") || strings.Contains(r.stderr, "delete the scratch bucket") {
		t.Fatalf("the scratch bucket was not deleted:\n%s\n%s", r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "bench", "--nats", srv.URL(), "--workload", "set", "--count", "10", "--raw", "--raw-bucket", "NOPE")
	wantContains(t, "stderr", r.stderr, "NOPE")
}
