package actors

import (
	"testing"
	"time"

	"testing/synctest"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// TestOwnershipRunsOnItsClock: the machine and its timers run on the clock they are
// given. On one 1000 times as fast, a 20 s lease renews every 5 ms: in 100 ms (of
// synctest's time) it renews about twenty times, where on the real clock it would not
// have renewed yet.
func TestOwnershipRunsOnItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNodeFrom(t, OwnershipConfig{Store: store, Clock: clock.Rate(1000),
			Lease: lease.Config{Me: leasetest.Holder("fast", ""), Lease: 20 * time.Second, StandbyTimeout: testStandby}})
		n.waitState(lease.StateServing, time.Second)
		first := n.o.Status().Revision
		time.Sleep(100 * time.Millisecond) // synctest's time: the renewal timers fire as they are due
		st := n.o.Status()
		if st.Revision < first+10 {
			t.Fatalf("revision %d after 100 ms, from %d: want ten renewals or more on the fast clock", st.Revision, first)
		}
		if st.State != lease.StateServing || time.Since(st.LastRenewed) > 10*time.Millisecond {
			t.Fatalf("status %+v: LastRenewed is not on the real time line", st)
		}
	})
}
