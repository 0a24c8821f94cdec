//go:build failpoints

package lease_test

import (
	"testing"

	"github.com/abi-engine/engine/internal/failpoint"
	. "github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// TestSkipFencing: with the fail point skip-fencing a holder that cannot renew never
// fences on its own clock (the partition scenario's fenced-within catches it), and the
// table sees nothing illegal. (The gate it moves still closes lease/2 after the last
// success: the per-call lease check is another fail point's.)
func TestSkipFencing(t *testing.T) {
	fp, err := failpoint.Parse("skip-fencing")
	if err != nil {
		t.Fatal(err)
	}
	store := leasetest.NewMemStore()
	me := newSimWith(t, store, Config{Me: holder("me", ""), Lease: lease, StandbyTimeout: standby, Failpoints: fp})
	me.start()
	me.at(renew)
	me.failing = true
	me.at(3 * lease)
	if me.m.State() != StateServing {
		t.Fatalf("state after %s of failed renewals = %v, want serving: the fence is skipped", 3*lease-renew, me.m.State())
	}
	if !me.m.Deadlines().Fence.IsZero() {
		t.Fatalf("a fence deadline is kept: %v", me.m.Deadlines().Fence)
	}
}
