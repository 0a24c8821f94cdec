package check

import (
	"strings"
	"testing"

	"github.com/abi-engine/engine/bench"
)

func TestCycleCallsAndRevisions(t *testing.T) {
	cs := Cycles{{N: 1, To: at(1000)}, {N: 2, From: at(1000), To: at(2000)}, {N: 3, From: at(2000)}}
	h := []bench.Op{
		get("k", instA, 0, -50, -40),  // before the first cycle: the first owns it
		get("k", instA, 0, 990, 1010), // invoked in 1, completed in 2: belongs to 1
		get("k", instB, 0, 1000, 1001),
		get("k", instB, 0, 2500, 2501), // after the last began: the last owns it
	}
	split := cs.Split(h)
	for i, want := range []int{2, 1, 1} {
		if got := len(cs[i].Calls(h)); got != want {
			t.Errorf("cycle %d: %d calls, want %d", i+1, got, want)
		}
		if got := len(split[i]); got != want {
			t.Errorf("split: cycle %d has %d calls, want %d", i+1, got, want)
		}
	}
	if c := cs.Of(at(-5000)); c.N != 1 {
		t.Fatalf("before the first cycle: %v", c)
	}
	if c := cs.Of(at(1500)); c.N != 2 {
		t.Fatalf("within the second: %v", c)
	}
	if c := cs.Of(at(9000)); c.N != 3 {
		t.Fatalf("after the last began: %v", c)
	}
	ev := []LeaseEvent{{At: at(0), Revision: 1}, {At: at(1500), Revision: 2}, {At: at(2500), Revision: 3}}
	if got := cs[1].Revisions(ev); len(got) != 2 || got[1].Revision != 2 {
		t.Fatalf("cycle 2 sees revisions %+v, want those before its end", got)
	}
	if got := cs[2].Revisions(ev); len(got) != 3 {
		t.Fatalf("the last cycle sees revisions %+v", got)
	}
}

func TestEachAndMerge(t *testing.T) {
	cs := Cycles{{N: 1, To: at(1000)}, {N: 2, From: at(1000), To: at(2000)}, {N: 3, From: at(2000)}}
	h := []bench.Op{
		get("k", instA, 0, 0, 1),
		failed(get("k", "", 0, 1500, 1501), "UNAVAILABLE", false),
		get("k", instB, 0, 2500, 2501),
	}
	rs := cs.Each(h, func(_ Cycle, calls []bench.Op) Result { return ZeroFailures(calls) })
	if len(rs) != 3 || rs[1].Cycle != 2 || rs[1].Passed || !strings.HasPrefix(rs[1].Details[0], "cycle 2: ") {
		t.Fatalf("verdicts %+v", rs)
	}
	other := Result{Name: "linearizable", Passed: true, Summary: "fine"}
	merged := Merge(append([]Result{rs[0], other}, rs[1:]...))
	if len(merged) != 2 || merged[0].Name != "zero-failures" || merged[1].Name != "linearizable" {
		t.Fatalf("merged %+v", merged)
	}
	m := merged[0]
	if m.Passed || m.Count != 1 || len(m.Cycles) != 3 || len(m.Details) != 1 ||
		!strings.HasPrefix(m.Summary, "1 of 3 cycles failed (cycle 2), 1 violation(s); cycle 2: 1 of 1 calls failed") {
		t.Fatalf("merged verdict %+v", m)
	}
	if got := FailedCycles(merged); len(got) != 1 || got[0] != 2 {
		t.Fatalf("failed cycles %v", got)
	}
	pass := Merge([]Result{rs[0], rs[2]})
	if len(pass) != 1 || !pass[0].Passed || !strings.HasPrefix(pass[0].Summary, "all 2 cycles passed; cycle 1: 1 calls, none failed") {
		t.Fatalf("merged passing verdicts %+v", pass)
	}
	// One cycle: its verdict as it is; no cycles: the whole history as one.
	if one := Merge(rs[:1]); len(one) != 1 || one[0].Summary != rs[0].Summary || one[0].Cycles != nil {
		t.Fatalf("a single cycle's verdict %+v", one)
	}
	if whole := Cycles(nil).Each(h, func(_ Cycle, calls []bench.Op) Result { return ZeroFailures(calls) }); len(whole) != 1 || whole[0].Cycle != 0 || whole[0].Count != 1 {
		t.Fatalf("no cycles: %+v", whole)
	}
	// Many violations over many cycles are listed up to MaxViolations.
	var many []Result
	for n := 1; n <= 30; n++ {
		many = append(many, Cycle{N: n}.Label(Result{Name: "x", Count: 2, Details: []string{"a", "b"}}))
	}
	if m := Merge(many)[0]; m.Count != 60 || len(m.Details) != MaxViolations || !strings.Contains(m.Summary, "(cycles 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …)") {
		t.Fatalf("merged many: %d details, summary %q", len(m.Details), m.Summary)
	}
}
