package primaries

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
)

// spawnOn spawns p's actor on the harness's engine; the test's cleanup poisons it.
func spawnOn(t *testing.T, h *harness, p *Primary) *actor.PID {
	t.Helper()
	pid := p.Spawn(h.engine)
	t.Cleanup(func() { h.poison(pid) })
	return pid
}

// waitPhase waits until the primary publishes phase want.
func waitPhase(t *testing.T, p *Primary, want actors.RolePhase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if v, err := p.view.Wait(ctx, func(v view) bool { return v.phase == want }); err != nil {
		t.Fatalf("phase %s, want %s: %v", v.phase, want, err)
	}
}

// The actor's phase follows the role commands, as its view publishes it, and a closed
// primary refuses to serve again.
func TestPhasesFollowTheRole(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old")
	p := newPrimary(t, nc, g.service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := spawnOn(t, h, p)
	waitPhase(t, p, actors.RoleIdle)

	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)
	waitPhase(t, p, actors.RoleServing)
	held := callAsync(client, "work", "held")
	recv(t, g.started, "the held call to start")
	h.send(pid, actors.StopAccepting{})
	if acc := expect[actors.Accepting](h); acc.On {
		t.Fatalf("StopAccepting answered %+v", acc)
	}
	waitPhase(t, p, actors.RoleDraining)
	g.open()
	if r := recv(t, held, "the held call"); r.err != nil || r.werr != nil {
		t.Fatalf("held call: %+v", r)
	}
	expect[actors.Drained](h)
	waitPhase(t, p, actors.RoleIdle)

	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)
	waitPhase(t, p, actors.RoleServing)
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
	waitPhase(t, p, actors.RoleStopped)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, p, actors.RoleClosed)
	h.send(pid, actors.Serve{})
	if f := expect[actors.ServeFailed](h); !errors.Is(f.Err, ErrClosed) {
		t.Fatalf("Serve after Close failed with %v, want ErrClosed", f.Err)
	}
	if err := p.Serve(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close = %v, want ErrClosed", err)
	}

}

// Role commands sent back to back run in the order received, each once the step of
// the one before has reported: their answers come in that order.
func TestRoleCommandsRunInTheOrderReceived(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	p := newPrimary(t, nc, newGated("x").service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := spawnOn(t, h, p)
	for _, m := range []any{actors.Serve{}, actors.StopAccepting{}, actors.Serve{}, actors.Stop{}} {
		h.send(pid, m)
	}
	var got []string
	drained := 0
	for len(got) < 4 || drained < 1 {
		switch m := recv(t, h.inbox, "a role reply").(type) {
		case actors.Accepting:
			got = append(got, map[bool]string{true: "on", false: "off"}[m.On])
		case actors.Down:
			got = append(got, "down")
		case actors.Drained:
			drained++
		default:
			t.Fatalf("got %T %+v", m, m)
		}
	}
	if strings.Join(got, " ") != "on off on down" {
		t.Fatalf("answers %v, want on off on down", got)
	}
	if r := call(client, "echo", "1", waitTimeout); !errors.Is(r.err, nats.ErrNoResponders) {
		t.Fatalf("call after Down: %+v, want no responders", r)
	}
}

// A Stop with nothing left to stop is answered at once, even while the broker is away;
// before, it waited up to a minute for the connection to come back.
func TestStopWithNothingToStopAnswersAtOnce(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	p := newPrimary(t, nc, newGated("x").service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := spawnOn(t, h, p)
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)

	srv.Stop()
	testwait.For(t, waitTimeout, "the connection to notice the broker is gone", func() bool { return !nc.IsConnected() })
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
}

// A step that finishes while no actor runs (the actor was poisoned, the next not yet
// spawned) reports to a PID nobody holds; the next instance takes the step's result and
// answers as the last one would have.
func TestTheNextInstanceTakesAReportNoActorTook(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old")
	p := newPrimary(t, nc, g.service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := p.Spawn(h.engine)
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)
	held := callAsync(client, "work", "held")
	recv(t, g.started, "the held call to start")
	h.send(pid, actors.StopAccepting{})
	expect[actors.Accepting](h)

	h.poison(pid)
	g.open()
	if r := recv(t, held, "the held call"); r.err != nil || r.werr != nil {
		t.Fatalf("held call: %+v", r)
	}
	testwait.For(t, waitTimeout, "the drain step to end", func() bool { return p.steps.Running() == 0 })
	select {
	case m := <-h.inbox:
		t.Fatalf("answered %+v with no actor running", m)
	default:
	}

	pid = spawnOn(t, h, p)
	if d := expect[actors.Drained](h); !d.From.Equals(pid) {
		t.Fatalf("Drained from %v, want %v", d.From, pid)
	}
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
}

// Stop with no actor running cancels the calls at once; the next instance ends the
// subscriptions.
func TestStopWithoutTheActorIsFinishedByTheNextInstance(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	p := newPrimary(t, nc, newGated("x").service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := p.Spawn(h.engine)
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)
	h.poison(pid)

	p.Stop()
	if r := call(client, "echo", "1", waitTimeout); r.werr == nil || !r.werr.Retryable {
		t.Fatalf("call after Stop without the actor: %+v, want a retryable refusal", r)
	}
	spawnOn(t, h, p)
	waitPhase(t, p, actors.RoleStopped)
	if r := call(client, "echo", "2", waitTimeout); !errors.Is(r.err, nats.ErrNoResponders) {
		t.Fatalf("call once the next actor ran: %+v, want no responders", r)
	}
}

// Close with no actor running ends the subscriptions itself, waits for what it started,
// and an actor spawned afterwards takes no part in the role.
func TestCloseWithoutTheActorEndsTheSubscriptions(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	p := newPrimary(t, nc, newGated("x").service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := p.Spawn(h.engine)
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)
	h.poison(pid)
	// Without its actor the primary serves on: calls never go through the actor.
	if r := call(client, "echo", "1", waitTimeout); r.err != nil || r.werr != nil {
		t.Fatalf("call with no actor: %+v", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r := call(client, "echo", "2", waitTimeout); !errors.Is(r.err, nats.ErrNoResponders) {
		t.Fatalf("call after Close: %+v, want no responders", r)
	}
	if n, calls := p.steps.Running(), p.InFlight(); n != 0 || calls != 0 {
		t.Fatalf("after Close: %d steps, %d calls", n, calls)
	}

	pid = spawnOn(t, h, p)
	h.send(pid, actors.Serve{})
	if f := expect[actors.ServeFailed](h); !errors.Is(f.Err, ErrClosed) {
		t.Fatalf("Serve to an actor spawned after Close failed with %v, want ErrClosed", f.Err)
	}
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
}

// Close is bounded by its context: a fencing Stop waiting for a broker that went away
// is cut short when Close gives up, and every step ends then, not when the connection
// comes back (up to a minute later).
func TestCloseCutsItsStepsShortAtItsDeadline(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	p := newPrimary(t, nc, newGated("x").service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := spawnOn(t, h, p)
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)

	srv.Stop()
	testwait.For(t, waitTimeout, "the connection to notice the broker is gone", func() bool { return !nc.IsConnected() })
	h.send(pid, actors.Stop{})
	waitPhase(t, p, actors.RoleStopping)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want its context's deadline", err)
	}
	testwait.For(t, waitTimeout, "the steps to end", func() bool { return p.steps.Running() == 0 })
	expect[actors.Down](h)
}
