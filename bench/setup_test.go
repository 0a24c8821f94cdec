package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// Seeding and cleanup keep at most setupConcurrency calls in flight, however many
// workers the run has: 512 requesters' cleanup, all at once, queued past the call
// timeout in a loaded engine.
func TestSetupCallsInFlightAreBounded(t *testing.T) {
	f := newFixture(t)
	st := newStore()
	serveKV(t, f.conn(t), st, "i", honest)
	cfg := testConfig(512)
	cfg.Workload = WorkloadGet // seeds, then cleans up
	cfg.Concurrency = 512
	cfg.Keys = 2048
	cfg.Timeout = 30 * time.Second
	rep, err := Run(t.Context(), f.tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var seeds, removals []Op
	for _, op := range rep.History {
		switch {
		case !op.Setup:
		case op.Kind == protocol.OpSet:
			seeds = append(seeds, op)
		case op.Kind == protocol.OpDelete:
			removals = append(removals, op)
		}
	}
	if len(seeds) != cfg.Keys || len(removals) != cfg.Keys {
		t.Fatalf("%d seeding sets and %d cleanup deletes, want %d of each", len(seeds), len(removals), cfg.Keys)
	}
	for name, ops := range map[string][]Op{"seeding": seeds, "cleanup": removals} {
		if n := mostInFlight(ops); n > setupConcurrency {
			t.Errorf("the %s had %d calls in flight at once, want at most %d", name, n, setupConcurrency)
		}
	}
}

// mostInFlight is the most calls of ops in flight at one instant (one invoked before
// another completed).
func mostInFlight(ops []Op) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, op := range ops {
		edges = append(edges, edge{op.Invoke, 1}, edge{op.Complete, -1})
	}
	// At one instant, completions before invocations: a worker's next call starts as
	// its last one ends.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	most, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}
