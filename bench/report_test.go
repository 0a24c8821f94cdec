package bench

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

func TestReportJSONRoundTrip(t *testing.T) {
	f := newFixture(t)
	serveKV(t, f.conn(t), newStore(), "i", honest)
	rep, err := Run(t.Context(), f.tr, testConfig(20))
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := rep.WriteJSON(&first); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(first.Bytes(), &back); err != nil {
		t.Fatalf("decode %s: %v", first.Bytes(), err)
	}
	var second bytes.Buffer
	if err := back.WriteJSON(&second); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() {
		t.Fatalf("round trip changed the report:\n%s\nvs\n%s", first.String(), second.String())
	}
	// JSON keeps wall-clock times only; the monotonic readings stay behind.
	wall := rep.History[0]
	wall.Invoke, wall.Complete = wall.Invoke.Round(0), wall.Complete.Round(0)
	if back.Config != rep.Config || back.Ops != 20 || back.Latency != rep.Latency ||
		back.Throughput != rep.Throughput || len(back.History) != len(rep.History) ||
		!back.History[0].Invoke.Equal(wall.Invoke) || back.History[0].Latency() != wall.Latency() {
		t.Errorf("decoded report differs: config %+v ops %d latency %+v throughput %v history %d, first op %+v vs %+v",
			back.Config, back.Ops, back.Latency, back.Throughput, len(back.History), back.History[0], wall)
	}
	for _, key := range []string{`"ops_per_sec"`, `"p99_ns"`, `"p999_ns"`, `"errors_by_code"`, `"mismatches"`, `"instances"`, `"history"`, `"stopped_by": "count"`} {
		contains(t, first.String(), key)
	}
}

func syntheticReport(tput float64, p50, p99 time.Duration) *Report {
	return &Report{
		Config:     DefaultConfig(),
		Elapsed:    2 * time.Second,
		StoppedBy:  StoppedByDuration,
		Throughput: tput,
		Summary: Summary{
			Ops: 1000, Errors: 3,
			ErrorsByCode: map[protocol.Code]int64{protocol.Unavailable: 2, protocol.DeadlineExceeded: 1},
			Latency:      Latency{Count: 997, P50: p50, P90: p50 * 2, P99: p99, P999: p99 * 2, Max: p99 * 3},
			Kinds: map[string]KindStats{
				protocol.OpSet: {Ops: 500, Errors: 3, Latency: Latency{P50: p50, P99: p99}},
				protocol.OpGet: {Ops: 500, Latency: Latency{P50: p50, P99: p99}},
			},
			Instances: map[string]int64{"aaaa": 600, "bbbb": 397},
		},
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := syntheticReport(500, 300*time.Microsecond, 2*time.Millisecond).Table(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`(?m)^workload +set-get$`, `(?m)^throughput +500\.0 ops/s$`, `(?m)^  UNAVAILABLE +2$`, `(?m)^  bbbb +397 ops$`, `p99\.9`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("table does not match %s:\n%s", want, out)
		}
	}
	// The percentile table's rows are right-aligned under their header.
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if regexp.MustCompile(`^\s*(kind|get|set|all)\s`).MatchString(line) {
			rows = append(rows, line)
		}
	}
	if len(rows) != 4 {
		t.Fatalf("percentile table rows %q, want kind, get, set, all", rows)
	}
	for _, r := range rows[1:] {
		if utf8.RuneCountInString(r) != utf8.RuneCountInString(rows[0]) {
			t.Errorf("row %q is not aligned with header %q", r, rows[0])
		}
	}
	contains(t, rows[3], "300µs")
	contains(t, rows[3], "2.00ms")
}

func TestCompare(t *testing.T) {
	raw := syntheticReport(1000, 250*time.Microsecond, time.Millisecond)
	eng := syntheticReport(800, 300*time.Microsecond, 1500*time.Microsecond)
	c := Compare(raw, eng)
	if c.Throughput != 0.8 || c.P50 != 1.2 || c.P99 != 1.5 {
		t.Errorf("ratios %+v, want 0.8, 1.2, 1.5", c)
	}
	want := "engine/raw NATS: throughput 0.80x (800 vs 1000 ops/s), p50 1.20x (300µs vs 250µs), p99 1.50x (1.50ms vs 1.00ms)"
	if c.String() != want {
		t.Errorf("line %q, want %q", c.String(), want)
	}
	if z := Compare(&Report{}, eng); z.Throughput != 0 || !strings.Contains(z.String(), "n/a") {
		t.Errorf("against an empty raw report: %v", z)
	}
}

// Rounds sum up to each ratio's median and range; an even count's median is the mean
// of the middle two.
func TestSummarizeRounds(t *testing.T) {
	cs := []Comparison{
		{Against: "header echo", Throughput: 0.9, P50: 1.2, P99: 1.5, RawThroughput: 100, EngineThroughput: 90},
		{Against: "header echo", Throughput: 1.1, P50: 1.0, P99: 1.1, RawThroughput: 90, EngineThroughput: 99},
		{Against: "header echo", Throughput: 0.95, P50: 0.9, P99: 2.0, RawThroughput: 80, EngineThroughput: 76},
	}
	r := SummarizeRounds(cs)
	if r.Rounds != 3 || r.Against != "header echo" || r.Throughput != (Spread{Median: 0.95, Min: 0.9, Max: 1.1}) ||
		r.P50 != (Spread{Median: 1.0, Min: 0.9, Max: 1.2}) || r.RawThroughput.Median != 90 || r.EngineThroughput.Median != 90 {
		t.Fatalf("%+v", r)
	}
	if got := SummarizeRounds(cs[:2]).Throughput.Median; got != 1.0 {
		t.Fatalf("median of two: %v, want 1.0", got)
	}
	want := "engine/header echo over 3 rounds, median (range): throughput 0.95x (0.90x-1.10x) (90 vs 90 ops/s), p50 1.00x (0.90x-1.20x), p99 1.50x (1.10x-2.00x)"
	if got := r.String(); got != want {
		t.Fatalf("String:\n got %s\nwant %s", got, want)
	}
	if (SummarizeRounds(nil) != Rounds{}) {
		t.Fatal("no rounds must sum up to nothing")
	}
}

// Each round runs the phases in the reverse order of the one before.
func TestRoundOrderAlternates(t *testing.T) {
	first, second := RoundOrder(0, false), RoundOrder(1, false)
	if !slices.Equal(first, []Phase{PhaseEcho, PhaseHeaderEcho, PhaseEngine}) ||
		!slices.Equal(second, []Phase{PhaseEngine, PhaseHeaderEcho, PhaseEcho}) || !slices.Equal(RoundOrder(2, false), first) ||
		!slices.Equal(RoundOrder(1, true), []Phase{PhaseEngine, PhaseStore, PhaseHeaderEcho, PhaseEcho}) {
		t.Fatalf("orders %v, %v, %v, %v", first, second, RoundOrder(2, false), RoundOrder(1, true))
	}
}
