package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/lease/leasetest"
)

// neverDrains is a member that serves and stops at once, but never drains: the drain
// phase ends only at its deadline.
func neverDrains(e *actor.Engine, name string) *actor.PID {
	return e.SpawnFunc(func(c *actor.Context) {
		switch c.Message().(type) {
		case Serve:
			c.Send(c.Sender(), Accepting{From: c.PID(), On: true})
		case StopAccepting:
			c.Send(c.Sender(), Accepting{From: c.PID(), On: false})
		case Stop:
			c.Send(c.Sender(), Down{From: c.PID()})
		}
	}, name)
}

// TestRootDeadlinesRunOnItsClock: the root feeds its machine its clock's now and arms
// the phase deadlines on that clock, never the wall clock: on a clock ten times as fast,
// a drain deadline of 10 s passes after 1 s.
func TestRootDeadlinesRunOnItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, leasetest.NewMemStore(), leasetest.Holder("a", ""))
		p := neverDrains(n.e, "primary")
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{p}, Drain: 10 * time.Second,
			Clock: clock.Rate(10)})
		if err != nil {
			t.Fatal(err)
		}
		if err := root.WaitServing(context.Background()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := root.Handover(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < time.Second || took >= 2*time.Second {
			t.Fatalf("the handover took %s, want the 10 s drain on a clock ten times as fast: about 1 s", took)
		}
		<-n.e.Poison(p).Done()
		closeRoot(t, root)
	})
}

// TestRootCloseWaitsForItsWaits: Close returns only once the root's waits have returned
// (here the second wait for sessions, which ignores its ctx for a while), and says so
// when its own ctx ends first.
func TestRootCloseWaitsForItsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, leasetest.NewMemStore(), leasetest.Holder("a", ""))
		var j journal
		p := member(n.e, "primary", &j, leasetest.NewMemStore(), 0)
		let := make(chan struct{})
		waiting := make(chan struct{})
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{p}, Drain: time.Hour,
			Sessions: func(context.Context) error { close(waiting); <-let; return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := root.WaitServing(context.Background()); err != nil {
			t.Fatal(err)
		}
		hctx, stop := context.WithCancel(context.Background())
		defer stop()
		handed := make(chan error, 1)
		go func() { handed <- root.Handover(hctx) }()
		<-waiting
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := root.Close(ctx); err == nil {
			t.Fatal("Close returned while the wait for sessions had not")
		}
		close(let)
		stop()
		if err := <-handed; err == nil {
			t.Fatal("a handover the root's close cut short returned no error")
		}
		<-n.e.Poison(p).Done()
	})
}

// TestRootTellsDeadlinesOnTheRealTimeLine: a member takes StopAccepting's drain
// deadline as a real time (its context, the jobs host's timer), so the root, whose
// machine counts on its own clock, tells it that deadline mapped back to the real time
// line: on a clock ten times as fast, a drain of 10 s ends 1 s after the handover
// began, for the member as for the root.
func TestRootTellsDeadlinesOnTheRealTimeLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, leasetest.NewMemStore(), leasetest.Holder("a", ""))
		told := make(chan time.Duration, 1)
		p := n.e.SpawnFunc(func(c *actor.Context) {
			switch m := c.Message().(type) {
			case Serve:
				c.Send(c.Sender(), Accepting{From: c.PID(), On: true})
			case StopAccepting:
				told <- time.Until(m.Deadline)
				c.Send(c.Sender(), Accepting{From: c.PID(), On: false})
			case Stop:
				c.Send(c.Sender(), Down{From: c.PID()})
			}
		}, "primary")
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{p}, Drain: 10 * time.Second,
			Clock: clock.Rate(10)})
		if err != nil {
			t.Fatal(err)
		}
		if err := root.WaitServing(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := root.Handover(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := <-told; d <= 0 || d > time.Second {
			t.Fatalf("the member was told a drain deadline %s away, want at most the 1 s the drain lasts on the real time line", d)
		}
		<-n.e.Poison(p).Done()
		closeRoot(t, root)
	})
}

// TestRootDeadlinesRunOnAFakeClock: on a clock moved by hand, the drain deadline passes
// only when the clock reaches it (10 s after the release, which the unmoved clock dates
// at its start). The test waits until the root has armed it, sees the handover still
// draining a second before it, and moves the clock to it.
func TestRootDeadlinesRunOnAFakeClock(t *testing.T) {
	clk := clock.NewFake(time.Now()) // its waits' deadlines are real times: start at the real now
	n := startNode(t, leasetest.NewMemStore(), leasetest.Holder("a", ""))
	p := neverDrains(n.e, "primary")
	root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{p}, Drain: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := root.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	handed := make(chan error, 1)
	go func() { handed <- root.Handover(ctx) }()
	// The release's deadline is replaced by the drain's once the lease is released.
	testwait.For(t, 10*time.Second, "the drain phase with its deadline armed", func() bool {
		return root.Phase() == PhaseDrain && clk.Pending() == 1
	})
	clk.Advance(9 * time.Second)
	select {
	case err := <-handed:
		t.Fatalf("the handover ended (%v) a second before its drain deadline on the root's clock", err)
	default:
	}
	clk.Advance(time.Second)
	if err := testwait.Recv(t, handed, 10*time.Second, "the handover once the clock passed the drain deadline"); err != nil {
		t.Fatal(err)
	}
	<-n.e.Poison(p).Done()
	closeRoot(t, root)
}
