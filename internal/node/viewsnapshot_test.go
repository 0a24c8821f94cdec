package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/lease/leasetest"
)

// TestViewIsOnePublication: the lease status and the phase the view shows are of one
// moment. The root is held inside the step that begins the handover (its Release sent,
// its step not yet published) while the ownership releases the lease: the view still
// shows the lease the root last heard of, serving, beside the relaying phase, never the
// released lease beside a phase that has not begun the handover (what a view read from
// the ownership and the root apart shows: "released", relaying). Once the root goes
// on, the view shows the lease released beside a phase of the handover.
func TestViewIsOnePublication(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := &holdingClock{Clock: clock.Real(), held: make(chan struct{}), release: make(chan struct{})}
	e, sys := startViewEngine(ctx, t, 4*time.Second, clk)
	own, root := e.ownership, e.root
	if v := e.View(); v.State != "serving" || v.Phase != actors.PhaseRelaying {
		t.Fatalf("before the handover: %s in phase %s, want serving, relaying", v.State, v.Phase)
	}

	// The handover's first step sends Release, then arms the release phase's deadline:
	// the clock holds the root there.
	clk.hold.Store(true)
	sys.Send(root.PID(), actors.Handover{})
	testwait.Recv(t, clk.held, 10*time.Second, "the root arming the release phase's deadline")
	if _, err := own.WaitFor(ctx, func(s actors.Status) bool { return s.State == lease.StateReleased }); err != nil {
		close(clk.release)
		t.Fatal(err)
	}
	v := e.View()
	close(clk.release)
	if v.Lease.State != lease.StateServing || v.Phase != actors.PhaseRelaying || v.State != "serving" {
		t.Fatalf("with the root held in its step and the lease released: the view shows the lease %s in phase %s (state %s); "+
			"want the root's last snapshot: serving, relaying (serving)", v.Lease.State, v.Phase, v.State)
	}
	testwait.For(t, 10*time.Second, "the view showing the lease released in a phase of the handover", func() bool {
		v := e.View()
		return v.Lease.State == lease.StateReleased && v.Phase > actors.PhaseRelease
	})
}

// TestViewFollowsTheLeaseRenewals: the lease status in the view is the ownership's as
// it changes, not only at the role changes the root relays: a renewal's revision and
// time reach the view (the metrics' revision, Healthy's last renewal).
func TestViewFollowsTheLeaseRenewals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, _ := startViewEngine(ctx, t, time.Second, clock.Real())
	first := e.View().Lease
	testwait.For(t, 10*time.Second, "a renewal in the view", func() bool {
		v := e.View().Lease
		return v.State == lease.StateServing && v.Revision > first.Revision && v.LastRenewed.After(first.LastRenewed)
	})
	if v, s := e.View().Lease, e.ownership.Status(); v.Revision > s.Revision {
		t.Fatalf("the view shows revision %d, past the ownership's %d", v.Revision, s.Revision)
	}
}

// startViewEngine is an engine of the view's parts only: an ownership that holds a
// lease of a real broker's bucket, and a root (with no member) on clk that serves.
func startViewEngine(ctx context.Context, t *testing.T, period time.Duration, clk clock.Clock) (*Engine, *actor.Engine) {
	t.Helper()
	srv := natstest.Start(t)
	store, err := jetstreamstore.Open(ctx, natstest.Connect(t, srv.URL()), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	own, err := actors.SpawnOwnership(sys, actors.OwnershipConfig{Store: store,
		Lease: lease.Config{Me: leasetest.Holder("a", ""), Lease: period, StandbyTimeout: period}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := own.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if st, err := own.Claim(ctx); err != nil || st != lease.StateServing {
		t.Fatalf("claim: %s, %v; want serving", st, err)
	}
	root, err := actors.SpawnRoot(sys, actors.RootConfig{Ownership: own, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := root.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if err := root.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	return &Engine{role: config.RoleServe, stage: stageUp, ownership: own, root: root}, sys
}

// holdingClock is the real clock, except that the first timer armed once hold is set
// blocks its caller (the root's Receive) until release is closed, having told held.
type holdingClock struct {
	clock.Clock
	hold    atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (c *holdingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.hold.CompareAndSwap(true, false) {
		c.held <- struct{}{}
		<-c.release
	}
	return c.Clock.AfterFunc(d, f)
}
