//go:build failpoints

package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// TestDropRenewalReply: with drop-renewal-reply every renewal commits but the holder
// never learns it: it fences at lease/2 and stays fenced, while its renewals keep the
// lease from anyone else. Nobody serves (the chaos scenarios' serving-gap catches it).
func TestDropRenewalReply(t *testing.T) {
	fp, err := failpoint.Parse("drop-renewal-reply")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNodeFrom(t, OwnershipConfig{Store: store, Failpoints: fp,
			Lease: lease.Config{Me: leasetest.Holder("a", ""), Lease: testLease, StandbyTimeout: testStandby}})
		n.waitState(lease.StateServing, time.Second)
		n.waitState(lease.StateFenced, testLease)
		before := read(t, store).Revision
		time.Sleep(2 * testLease) // synctest's time: renewals go on
		rec := read(t, store)
		if n.o.Status().State != lease.StateFenced || rec.Revision <= before || rec.Holder.InstanceID != "engine-a" {
			t.Fatalf("state %v, lease %v (revision %d at the fence): want fenced, the lease renewed by a all along",
				n.o.Status().State, rec, before)
		}
	})
}
