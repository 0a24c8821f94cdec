package actors

import (
	"testing"
	"time"

	"testing/synctest"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

func TestRateClockMapsToRealTime(t *testing.T) {
	base := time.Now()
	c := &rateClock{base: base, rate: 2}
	if got := c.Real(base.Add(2 * time.Second)); !got.Equal(base.Add(time.Second)) {
		t.Fatalf("Real(base+2s) = base%+v, want base+1s", got.Sub(base))
	}
	if !c.Real(time.Time{}).IsZero() || !(realClock{}).Real(base).Equal(base) {
		t.Fatal("Real of the zero time or on the real clock moved it")
	}
	if d := realDuration(c, time.Second); d != 500*time.Millisecond {
		t.Fatalf("a second on a 2x clock lasts %s, want 500ms", d)
	}
	if now := c.Now(); now.Before(base) || c.Real(now).After(time.Now()) {
		t.Fatalf("Now %v maps back to %v, after the real now", now, c.Real(now))
	}
}

// TestOwnershipRunsOnItsClock: the machine and its timers run on the clock they are
// given. On one 1000 times as fast, a 20 s lease renews every 5 ms: in 100 ms (of
// synctest's time) it renews about twenty times, where on the real clock it would not
// have renewed yet.
func TestOwnershipRunsOnItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := lease.NewMemStore()
		n := startNodeFrom(t, OwnershipConfig{Store: store, Clock: RateClock(1000),
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
