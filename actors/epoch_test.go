package actors

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
	"github.com/anthdm/hollywood/actor"
)

// testDrain is the drain_seconds of the epoch tests' engines.
const testDrain = 3 * time.Second

func drainCfg(h lease.Holder, drain time.Duration) lease.Config {
	return lease.Config{Me: h, Lease: testLease, StandbyTimeout: testStandby, Drain: drain}
}

func readEpoch(t *testing.T, s lease.Store) lease.EpochRecord {
	t.Helper()
	e, err := s.ReadEpoch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (n *node) waitEpoch(want uint64, within time.Duration) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if _, err := n.o.WaitFor(ctx, func(s Status) bool { return s.State == lease.StateServing && s.Epoch == want }); err != nil {
		n.t.Fatalf("serving under epoch %d (now %d): %v", want, n.o.Status().Epoch, err)
	}
}

// epochRoles are the Serving and EpochChanged broadcasts n received, as "serving N" and
// "epoch N".
func (n *node) epochRoles() []string {
	var out []string
	for _, r := range n.roleLog() {
		switch m := r.(type) {
		case Serving:
			out = append(out, fmt.Sprintf("serving %d", m.Epoch))
		case EpochChanged:
			out = append(out, fmt.Sprintf("epoch %d", m.Epoch))
		}
	}
	return out
}

// handedOver is a holder A (rollout v1) that released the lease to a standby B (v2):
// B serves under A's epoch, which A marked draining.
func handedOver(t *testing.T, store lease.Store, drainB time.Duration) (a, b *node) {
	a = startNodeWith(t, store, drainCfg(leasetest.Holder("a", "v1"), testDrain))
	a.waitState(lease.StateServing, time.Second)
	b = startNodeWith(t, store, drainCfg(leasetest.Holder("b", "v2"), drainB))
	b.waitState(lease.StateStandby, time.Second)
	if _, err := a.o.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.waitState(lease.StateServing, time.Second)
	if e := readEpoch(t, store); e.Epoch != 1 || e.InstanceID != a.o.Config().Me.InstanceID || e.State != lease.EpochDraining {
		t.Fatalf("after the release the record is %v, want epoch 1 of a, draining", e)
	}
	if s := b.o.Status(); s.Epoch != 1 {
		t.Fatalf("the successor serves under epoch %d, want a's 1 while a drains", s.Epoch)
	}
	return a, b
}

// A clean handover: the successor serves at once under the old holder's epoch, and
// takes the next one the moment the old holder marks its drain over.
func TestSuccessorBumpsWhenTheDrainIsMarked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a, b := handedOver(t, store, time.Hour)
		time.Sleep(time.Second) // a drains; b keeps its epoch
		if s := b.o.Status(); s.Epoch != 1 {
			t.Fatalf("epoch %d while a drains, want 1", s.Epoch)
		}
		a.e.Send(a.o.PID(), MarkDrained{})
		b.waitEpoch(2, 100*time.Millisecond)
		if e := readEpoch(t, store); e.Epoch != 2 || e.InstanceID != b.o.Config().Me.InstanceID || e.State != lease.EpochServing {
			t.Fatalf("record %v, want epoch 2 of b, serving", e)
		}
		if got := b.epochRoles(); !slices.Equal(got, []string{"serving 1", "epoch 2"}) {
			t.Fatalf("b was told %v, want serving under 1, then epoch 2", got)
		}
	})
}

// Without the old holder's mark (it crashed while draining, or its mark was lost), the
// successor takes the next epoch once its own drain_seconds have passed since it took
// the lease: never sooner, and not much later.
func TestSuccessorBumpsAfterItsDrainTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		_, b := handedOver(t, store, testDrain)
		took := time.Now()
		time.Sleep(testDrain - 100*time.Millisecond)
		if s := b.o.Status(); s.Epoch != 1 {
			t.Fatalf("epoch %d before the drain time, want 1", s.Epoch)
		}
		b.waitEpoch(2, 200*time.Millisecond)
		if at := time.Since(took); at < testDrain-50*time.Millisecond {
			t.Fatalf("bumped %s after taking the lease, before its drain time %s", at, testDrain)
		}
	})
}

// The contender killed while a bump is deferred is told to watch the epoch again.
func TestDeferredBumpSurvivesAContenderRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a, b := handedOver(t, store, time.Hour)
		b.e.Send(b.o.Child(ContenderName), Kill{Reason: "test"})
		synctest.Wait()
		a.e.Send(a.o.PID(), MarkDrained{})
		b.waitEpoch(2, 100*time.Millisecond)
	})
}

// A takeover of a silent holder takes the next epoch before it serves: the successor
// never serves under the old one.
func TestTakeoverBumpsBeforeServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNodeWith(t, store, drainCfg(leasetest.Holder("a", "v1"), testDrain))
		a.waitState(lease.StateServing, time.Second)
		if err := a.o.Stop(context.Background()); err != nil { // a crash: no release
			t.Fatal(err)
		}
		b := startNodeWith(t, store, drainCfg(leasetest.Holder("b", "v2"), testDrain))
		b.waitState(lease.StateServing, 3*testLease)
		if got := b.epochRoles(); !slices.Equal(got, []string{"serving 2"}) {
			t.Fatalf("b was told %v, want serving under 2 only", got)
		}
		if e := readEpoch(t, store); e.Epoch != 2 || e.InstanceID != b.o.Config().Me.InstanceID {
			t.Fatalf("record %v, want epoch 2 of b", e)
		}
	})
}

// epochMember obeys Serve the way a primary does and journals the epoch it was told.
func epochMember(e *actor.Engine, name string, j *journal) *actor.PID {
	return e.SpawnFunc(func(c *actor.Context) {
		from := c.Sender()
		switch m := c.Message().(type) {
		case Serve:
			j.add("%s serve %d", name, m.Epoch)
			c.Send(from, Accepting{From: c.PID(), On: true})
		case StopAccepting:
			c.Send(from, Accepting{From: c.PID(), On: false})
			c.Send(from, Drained{From: c.PID()})
		case Stop:
			c.Send(from, Down{From: c.PID()})
		}
	}, name)
}

// The root tells its members the epoch to serve under, and again, serving already,
// when it rises.
func TestRootFansOutTheEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNodeWith(t, store, drainCfg(leasetest.Holder("a", "v1"), testDrain))
		a.waitState(lease.StateServing, time.Second)
		b := startNodeWith(t, store, drainCfg(leasetest.Holder("b", "v2"), time.Hour))
		b.waitState(lease.StateStandby, time.Second)
		var j journal
		p1, p2 := epochMember(b.e, "p1", &j), epochMember(b.e, "p2", &j)
		root, err := SpawnRoot(b.e, RootConfig{Ownership: b.o, Members: []*actor.PID{p1, p2}, Drain: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.o.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := root.WaitServing(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := j.all(); !sameLines(got, "p1 serve 1", "p2 serve 1") || root.Epoch() != 1 {
			t.Fatalf("members were told %v (root epoch %d), want serve 1 each", got, root.Epoch())
		}
		a.e.Send(a.o.PID(), MarkDrained{})
		b.waitEpoch(2, 100*time.Millisecond)
		synctest.Wait()
		if got := j.all(); !sameLines(got, "p1 serve 1", "p2 serve 1", "p1 serve 2", "p2 serve 2") ||
			root.Epoch() != 2 || root.State() != lease.StateServing {
			t.Fatalf("members were told %v (root epoch %d, state %s), want serve 2 each after serve 1", got, root.Epoch(), root.State())
		}
		<-b.e.Poison(p1).Done()
		<-b.e.Poison(p2).Done()
		closeRoot(t, root)
	})
}

// sameLines: got holds want, in any order.
func sameLines(got []string, want ...string) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(got, w) })
}

// A handover marks the epoch draining before the release and drained once its drain
// and sessions are over (the drained phase, answered by the ownership), so a successor
// with a long drain_seconds takes the next epoch right after the old engine's drain.
func TestHandoverMarksTheEpochDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		a := startNodeWith(t, store, drainCfg(leasetest.Holder("a", "v1"), testDrain))
		var j journal
		slow := member(a.e, "slow", &j, store, 500*time.Millisecond)
		root, err := SpawnRoot(a.e, RootConfig{Ownership: a.o, Members: []*actor.PID{slow}, Drain: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := root.WaitServing(context.Background()); err != nil {
			t.Fatal(err)
		}
		b := startNodeWith(t, store, drainCfg(leasetest.Holder("b", "v2"), time.Hour))
		b.waitState(lease.StateStandby, time.Second)
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- root.Handover(context.Background()) }()
		b.waitState(lease.StateServing, time.Second)
		synctest.Wait() // a's root hears of its release
		if s := b.o.Status(); s.Epoch != 1 || root.Phase() != PhaseDrain {
			t.Fatalf("during a's drain: b under epoch %d, a's phase %s; want 1, drain", s.Epoch, root.Phase())
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took >= time.Second {
			t.Fatalf("handover took %s: the drained phase waited for its deadline", took)
		}
		if e := readEpoch(t, store); e.InstanceID == a.o.Config().Me.InstanceID && e.State != lease.EpochDrained {
			t.Fatalf("record %v after the handover, want a's drained (or b's next)", e)
		}
		b.waitEpoch(2, 100*time.Millisecond)
		<-a.e.Poison(slow).Done()
		closeRoot(t, root)
	})
}
