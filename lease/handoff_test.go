package lease_test

import (
	"context"
	"testing"

	. "github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// The engines of the handover tests, as the transition table's fixture names them: me
// and peer of rollout v2, old of v1, other of v3.
var (
	fxMe    = holder("me", "v2")
	fxPeer  = holder("peer", "v2")
	fxOld   = holder("old", "v1")
	fxOther = holder("other", "v3")
)

func TestReleasedToFormKeepsSixKeysAndRoundTrips(t *testing.T) {
	for _, tg := range []Target{{RolloutID: "v3"}, {InstanceID: "0123456789abcdef0123456789abcdef", RolloutID: "v2"}, {InstanceID: "abc"}} {
		form := fxOld.ReleasedTo(tg)
		got := DecodeHolder(form.Encode())
		if got != form {
			t.Fatalf("decoded %+v, want %+v", got, form)
		}
		back, ok := got.Handoff()
		if !ok || back != tg {
			t.Fatalf("Handoff() = %+v, %v; want %+v", back, ok, tg)
		}
		if got.InstanceID != fxOld.InstanceID || got.Host != fxOld.Host || got.PID != fxOld.PID {
			t.Fatalf("the form lost the releasing holder: %+v", got)
		}
	}
	if _, ok := fxOld.Handoff(); ok {
		t.Fatal("a plain record reads as released-to")
	}
	if (Target{RolloutID: "v3"}).Names(fxMe) || !(Target{RolloutID: "v2"}).Names(fxMe) ||
		!(Target{InstanceID: fxMe.InstanceID, RolloutID: "x"}).Names(fxMe) || (Target{InstanceID: "other"}).Names(fxMe) ||
		(Target{}).Names(Holder{InstanceID: "a"}) {
		t.Fatal("Names does not follow the instance, else the rollout")
	}
}

// serveOn makes a sim serve the store's lease, whose epoch it settles as the first.
func serveOn(t *testing.T, store *leasetest.MemStore, h Holder) *sim {
	t.Helper()
	s := newSimWith(t, store, Config{Me: h, Lease: lease, StandbyTimeout: standby, Drain: drain})
	s.start()
	if s.m.State() != StateServing {
		t.Fatalf("%s: %v, want serving", h.InstanceID, s.m.State())
	}
	return s
}

func standbyOn(t *testing.T, store *leasetest.MemStore, h Holder, hot bool) *sim {
	t.Helper()
	s := newSimWith(t, store, Config{Me: h, Lease: lease, StandbyTimeout: standby, Drain: drain, Hot: hot})
	s.start()
	if s.m.State() != StateStandby {
		t.Fatalf("%s: %v, want standby", h.InstanceID, s.m.State())
	}
	return s
}

// TestDirectedHandoverGoesToTheNamedRolloutAtOnce: the holder (v1) hands over to v3;
// standbys of v2 and v3 watch. v3 takes it at once, deferring the epoch like after a
// delete; v2 keeps standing by, judging the form as a silent holder.
func TestDirectedHandoverGoesToTheNamedRolloutAtOnce(t *testing.T) {
	store := leasetest.NewMemStore()
	old := serveOn(t, store, fxOld)
	v2 := standbyOn(t, store, fxMe, false)
	v3 := standbyOn(t, store, fxOther, false)
	advance := run(t, old, v2, v3)
	advance(renew / 2)

	old.m.HandTo(Target{RolloutID: "v3"})
	old.apply(old.m.Release(old.now))
	if old.m.State() != StateReleased {
		t.Fatalf("holder %v after the release, want released", old.m.State())
	}
	rec, _ := store.Read(context.Background())
	if tg, ok := rec.Holder.Handoff(); !ok || tg.RolloutID != "v3" || rec.Holder.InstanceID != fxOld.InstanceID {
		t.Fatalf("the lease after the release is %v, want the released-to form for v3", rec)
	}
	if e, _ := store.ReadEpoch(context.Background()); e.State != EpochDraining {
		t.Fatalf("epoch record %v, want draining before the hand-off", e)
	}
	// One watch delivery, no time passing: v3 serves.
	v3.advance(v3.now)
	v2.advance(v2.now)
	if v3.m.State() != StateServing {
		t.Fatalf("v3 %v, want serving at once", v3.m.State())
	}
	if r := v3.m.Role(); !r.Shared {
		t.Fatalf("v3 serves as %+v, want the epoch deferred behind the draining holder (shared)", r)
	}
	if v2.m.State() != StateStandby {
		t.Fatalf("v2 %v, want standing by", v2.m.State())
	}
	rec, _ = store.Read(context.Background())
	if rec.Holder != fxOther {
		t.Fatalf("holder %v, want v3", rec.Holder)
	}
	// v2 watches v3 now and goes on standing by while it renews.
	advance(3 * lease)
	if v2.m.State() != StateStandby || v3.m.State() != StateServing {
		t.Fatalf("after 3 leases: v2 %v, v3 %v", v2.m.State(), v3.m.State())
	}
}

// TestHandoverToADeadSuccessorCostsOneLease: the named rollout has no engine (it died
// mid-handover); the other standby takes the form over after a lease of silence.
func TestHandoverToADeadSuccessorCostsOneLease(t *testing.T) {
	store := leasetest.NewMemStore()
	old := serveOn(t, store, fxOld)
	v2 := standbyOn(t, store, fxMe, false)
	advance := run(t, old, v2)
	advance(renew / 2)
	old.m.HandTo(Target{RolloutID: "v3"})
	old.apply(old.m.Release(old.now))
	released := old.now
	v2.advance(v2.now)
	if v2.m.State() != StateStandby {
		t.Fatalf("v2 %v right after the hand-off to v3, want standing by", v2.m.State())
	}
	if at := v2.m.Deadlines().Takeover; at.Before(released.Add(lease)) {
		t.Fatalf("v2 would take over at +%s, before a lease of silence", at.Sub(released))
	}
	advance(renew/2 + lease + renew)
	if v2.m.State() != StateServing {
		t.Fatalf("v2 %v a lease after the hand-off to a dead v3, want serving", v2.m.State())
	}
	if v2.m.Role().Shared {
		t.Fatal("v2 took the form over and deferred the epoch: a takeover bumps at once")
	}
}

// TestHandoverToAnInstance: without --to, the longest-waiting standby is named by its
// instance; another standby of the same rollout waits.
func TestHandoverToAnInstance(t *testing.T) {
	store := leasetest.NewMemStore()
	old := serveOn(t, store, fxOld)
	a := standbyOn(t, store, fxMe, false)
	b := standbyOn(t, store, fxOther, false)
	old.m.HandTo(Target{InstanceID: fxOther.InstanceID, RolloutID: "v3"})
	old.apply(old.m.Release(old.now))
	a.advance(a.now)
	b.advance(b.now)
	if a.m.State() != StateStandby || b.m.State() != StateServing {
		t.Fatalf("a %v, b %v; want b serving, a standing by", a.m.State(), b.m.State())
	}
}

// TestHotStandbyWaitsForItsOwnRollout: with standby hot, an engine of the holder's own
// rollout stands by (with no timeout) instead of refusing, and takes over one lease
// after the holder goes silent; without it, the same engine refuses.
func TestHotStandbyWaitsForItsOwnRollout(t *testing.T) {
	store := leasetest.NewMemStore()
	holderSim := serveOn(t, store, fxPeer)
	cold := newSim(t, store, fxMe)
	cold.start()
	run(t, holderSim, cold)(lease + renew)
	if cold.m.State() != StateIdle || cold.err == nil {
		t.Fatalf("cold: %v %v, want refused", cold.m.State(), cold.err)
	}
	hot := newSimWith(t, store, Config{Me: fxMe, Lease: lease, StandbyTimeout: standby, Drain: drain, Hot: true})
	hot.now = holderSim.now
	hot.start()
	if hot.m.State() != StateStandby {
		t.Fatalf("hot %v, want standing by", hot.m.State())
	}
	if d := hot.m.Deadlines(); !d.Standby.IsZero() {
		t.Fatalf("a hot standby has a standby timeout at %v", d.Standby)
	}
	run(t, holderSim, hot)(2*lease + 2*renew + standby)
	if hot.m.State() != StateStandby {
		t.Fatalf("hot %v after the standby timeout, want still standing by; %v; holder %v %v", hot.m.State(), hot.log, holderSim.m.State(), holderSim.log)
	}
	// The holder crashes: it stops renewing (its sim is no longer advanced).
	crashed := hot.now
	hot.advance(crashed.Add(lease + renew + renew))
	if hot.m.State() != StateServing {
		t.Fatalf("hot %v a lease after the crash, want serving", hot.m.State())
	}
}
