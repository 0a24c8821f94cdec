package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// TestStandbyTakesOverAfterAFailedTakeoverRead: a standby whose takeover read fails
// retries it lease/4 later and takes the dead holder's lease over. Before the machine's
// retry-wait sub-states, its deadlines still named the takeover that had passed, the
// contender's timer was not armed again for the same instant, and the standby waited
// for ever.
func TestStandbyTakesOverAfterAFailedTakeoverRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := lease.NewMemStore()
		flaky := leasetest.NewFlaky(mem)
		a := startNode(t, mem, leasetest.Holder("a", "v1"))
		a.waitState(lease.StateServing, time.Second)
		b := startNode(t, flaky, leasetest.Holder("b", "v2"))
		b.waitState(lease.StateStandby, time.Second)
		a.stop() // a crash: no release
		flaky.Fail(true)
		time.Sleep(testLease + testLease/8) // b's takeover read has failed
		synctest.Wait()
		if s := b.o.Status(); s.State != lease.StateStandby {
			t.Fatalf("b is %v while the store fails, want standby", s.State)
		}
		flaky.Fail(false)
		b.waitState(lease.StateServing, testLease)
	})
}
