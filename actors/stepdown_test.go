package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// TestHandToDirectsTheRelease: HandTo makes the ownership's release a directed
// handover: the standby of the named rollout serves at once, the other keeps standing
// by, and the standbys' Status says since when they wait.
func TestHandToDirectsTheRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNode(t, store, leasetest.Holder("a", "v1"))
		a.waitState(lease.StateServing, time.Second)
		v2 := startNode(t, store, leasetest.Holder("b", "v2"))
		v2.waitState(lease.StateStandby, time.Second)
		time.Sleep(testLease / 8)
		v3 := startNode(t, store, leasetest.Holder("c", "v3"))
		v3.waitState(lease.StateStandby, time.Second)
		if s2, s3 := v2.o.Status().Since, v3.o.Status().Since; !s2.Before(s3) {
			t.Fatalf("standby since: v2 %v, v3 %v; v2 waits longer", s2, s3)
		}
		to := lease.Target{RolloutID: "v3"}
		if err := a.o.HandTo(context.Background(), to); err != nil {
			t.Fatal(err)
		}
		if got := a.o.Status().HandingTo; got != to {
			t.Fatalf("HandingTo %v", got)
		}
		released := time.Now()
		if s, err := a.o.Release(context.Background()); err != nil || s.State != lease.StateReleased {
			t.Fatalf("Release = %v, %v", s.State, err)
		}
		v3.waitState(lease.StateServing, testLease/2)
		if took := time.Since(released); took > testLease/4 {
			t.Fatalf("v3 served %s after the hand-off", took)
		}
		time.Sleep(2 * testLease)
		if s := v2.o.Status().State; s != lease.StateStandby {
			t.Fatalf("v2 %v, want still standing by", s)
		}
		if r := read(t, store); r.Holder.InstanceID != "engine-c" {
			t.Fatalf("holder %v", r.Holder)
		}
	})
}
