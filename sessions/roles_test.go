package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/protocol"
)

// roleReplies spawns an actor on eng that plays the root: every reply to a role
// command lands on the returned channel.
func roleReplies(t *testing.T, eng *actor.Engine) (*actor.PID, <-chan any) {
	t.Helper()
	replies := make(chan any, 16)
	pid := eng.SpawnFunc(func(c *actor.Context) {
		switch m := c.Message().(type) {
		case actors.Accepting, actors.Drained, actors.Down, actors.ServeFailed:
			replies <- m
		}
	}, "root")
	t.Cleanup(func() { <-eng.Poison(pid).Done() })
	return pid, replies
}

// A Stop is not held behind a StopAccepting that waits for a broker that went away:
// fencing often comes with a broker that went away, and must stop the host at once.
// Before, the role commands took turns on a mutex, and the Stop waited out the
// StopAccepting's deadline (a minute here).
func TestAStopIsNotHeldBehindAStopAcceptingThatWaitsForTheBroker(t *testing.T) {
	srv := smallBroker(t)
	nc := connect(t, srv)
	h := startHost(t, nc, TransferConfig{Handlers: newStore().handlers()})
	eng := engineOf(h)
	root, replies := roleReplies(t, eng)

	away := nc.StatusChanged(nats.RECONNECTING)
	defer nc.RemoveStatusListener(away)
	srv.Stop()
	testwait.Recv(t, away, 10*time.Second, "the client noticing the broker is gone")

	eng.SendWithSender(h.PID(), actors.StopAccepting{Deadline: time.Now().Add(time.Minute)}, root)
	eng.SendWithSender(h.PID(), actors.Stop{}, root)
	if m := testwait.Recv(t, replies, 10*time.Second, "the answer to StopAccepting"); m != (actors.Accepting{From: h.PID(), On: false}) {
		t.Fatalf("StopAccepting answered %#v", m)
	}
	if m := testwait.Recv(t, replies, 10*time.Second, "Down, well before the StopAccepting's deadline"); m != (actors.Down{From: h.PID()}) {
		t.Fatalf("Stop answered %#v", m)
	}
}

// Close is bounded: a handler that ignores its context cannot hold it past its
// context, and once it returns a second Close finds everything ended. A closed host
// never serves again.
func TestCloseIsBoundedAndFinal(t *testing.T) {
	srv := smallBroker(t)
	running, release := make(chan struct{}), make(chan struct{})
	released := false
	free := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(free)
	h, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix, LeaseValid: leaseHeld, Handlers: map[string]Handler{
		"deaf": func(context.Context, TransferRequest) ([]byte, error) {
			close(running)
			<-release // ignores its context, as a handler must not
			return nil, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.Spawn(newEngine(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, connect(t, srv), testPrefix)
	o, err := c.open("deaf", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := c.start(o.ID)
		started <- err
	}()
	testwait.Closed(t, running, 10*time.Second, "the handler runs")

	closed := make(chan error, 1)
	go func() {
		short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancelShort()
		closed <- h.Close(short)
	}()
	if err := testwait.Recv(t, closed, 10*time.Second, "Close to give up at its context's deadline"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a deaf handler = %v, want the deadline", err)
	}
	wantCode(t, testwait.Recv(t, started, 10*time.Second, "the start's answer"), protocol.NotFound)
	free()
	if err := h.Close(ctx); err != nil {
		t.Fatalf("Close once the handler returned: %v", err)
	}
	if err := h.Serve(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close = %v, want ErrClosed", err)
	}
}

// A host actor that stops without Close (its parent, or a teardown, poisoned it) ends
// what the host holds: the running handler is cancelled and its start answered, the
// subscriptions end, and the reaper's ticker stops with the actor. Close then finds
// nothing left, and the host never serves again.
func TestAHostActorThatStopsEndsWhatItHolds(t *testing.T) {
	srv := smallBroker(t)
	nc := connect(t, srv)
	clock := newFakeClock()
	running := make(chan struct{})
	h, err := NewTransferHost(nc, TransferConfig{Prefix: testPrefix, LeaseValid: leaseHeld, Clock: clock, Handlers: map[string]Handler{
		"wait": func(ctx context.Context, _ TransferRequest) ([]byte, error) {
			close(running)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	spawnAndServe(t, h)
	if n := clock.Pending(); n != 1 {
		t.Fatalf("%d tickers while serving, want the reaper's", n)
	}
	c := newClient(t, connect(t, srv), testPrefix)
	o, err := c.open("wait", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := c.start(o.ID)
		started <- err
	}()
	testwait.Closed(t, running, 10*time.Second, "the handler runs")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	<-engineOf(h).PoisonCtx(ctx, h.PID()).Done()
	wantCode(t, testwait.Recv(t, started, 10*time.Second, "the start's answer"), protocol.NotFound)
	h.Stop() // returns once what the actor left behind has ended
	if n := h.Sessions(); n != 0 {
		t.Fatalf("%d sessions open after the host actor stopped", n)
	}
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d tickers left running after the host actor stopped", n)
	}
	if _, err := nc.Request(OwnerSubject(testPrefix, h.Owner(), "read"), []byte("{}"), time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("owner subject after the host actor stopped: %v, want no responders", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatalf("Close after the host actor stopped: %v", err)
	}
	if err := h.Serve(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after the host actor stopped = %v, want ErrClosed", err)
	}
}

// The handover's state survives a crash of the host actor between StopAccepting and
// the end of the drain: Drained still comes once the last session closes.
func TestAHostActorCrashDuringTheDrainStillAnswersDrained(t *testing.T) {
	srv := smallBroker(t)
	h, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix, Handlers: newStore().handlers(), LeaseValid: leaseHeld})
	if err != nil {
		t.Fatal(err)
	}
	eng := newEngine(t)
	restarts := countRestarts(t, eng)
	pid := h.Spawn(eng)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	root, replies := roleReplies(t, eng)
	c := newClient(t, connect(t, srv), testPrefix)

	eng.SendWithSender(pid, actors.Serve{}, root)
	if m := testwait.Recv(t, replies, 10*time.Second, "the answer to Serve"); m != (actors.Accepting{From: pid, On: true}) {
		t.Fatalf("Serve answered %#v", m)
	}
	o, err := c.open("echo", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	eng.SendWithSender(pid, actors.StopAccepting{Deadline: time.Now().Add(time.Minute)}, root)
	if m := testwait.Recv(t, replies, 10*time.Second, "the answer to StopAccepting"); m != (actors.Accepting{From: pid, On: false}) {
		t.Fatalf("StopAccepting answered %#v", m)
	}
	eng.Send(pid, actors.Kill{Reason: "chaos"})
	testwait.For(t, 10*time.Second, "the crash handled", func() bool { return restarts() == 1 })
	if _, err := c.roundTripOn(o, []byte("after the crash")); err != nil {
		t.Fatal(err)
	}
	if m := testwait.Recv(t, replies, 10*time.Second, "Drained after the last session closed"); m != (actors.Drained{From: pid}) {
		t.Fatalf("after the last session: %#v", m)
	}
	eng.SendWithSender(pid, actors.Stop{}, root)
	if m := testwait.Recv(t, replies, 10*time.Second, "the answer to Stop"); m != (actors.Down{From: pid}) {
		t.Fatalf("Stop answered %#v", m)
	}
}

// A Serve that fails (the broker is away) leaves the host as it found it: nothing
// subscribed that the connection would subscribe again once the broker is back. A
// later Serve serves.
func TestAServeThatFailsLeavesNothingSubscribed(t *testing.T) {
	srv := smallBroker(t)
	nc := connect(t, srv)
	h, err := NewTransferHost(nc, TransferConfig{Prefix: testPrefix, Handlers: newStore().handlers(), LeaseValid: leaseHeld})
	if err != nil {
		t.Fatal(err)
	}
	spawnAndServe(t, h)
	h.Stop()
	away := nc.StatusChanged(nats.RECONNECTING)
	defer nc.RemoveStatusListener(away)
	srv.Stop()
	testwait.Recv(t, away, 10*time.Second, "the client noticing the broker is gone")
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if err := h.Serve(short); err == nil {
		t.Fatal("Serve succeeded without a broker")
	}

	back := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(back)
	srv.Restart()
	testwait.Recv(t, back, 10*time.Second, "the client reconnecting")
	if err := nc.Flush(); err != nil { // the resubscriptions, if any, are at the broker
		t.Fatal(err)
	}
	caller := connect(t, srv)
	if _, err := caller.Request(OwnerSubject(testPrefix, h.Owner(), "read"), []byte("{}"), time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("owner subject after a failed Serve: %v, want no responders", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, caller, testPrefix).roundTrip("echo", nil, []byte("served")); err != nil {
		t.Fatal(err)
	}
}

// A StopAccepting cut short while the connection is down drains nothing (a drain then
// would leave the subscription at the broker, swallowing opens); the host keeps
// accepting, and a StopAccepting once the broker is back ends <prefix>.open.
func TestAStopAcceptingWhileDisconnectedDrainsOnceConnected(t *testing.T) {
	srv := smallBroker(t)
	nc := connect(t, srv)
	h := startHost(t, nc, TransferConfig{Handlers: newStore().handlers()})
	away := nc.StatusChanged(nats.RECONNECTING)
	defer nc.RemoveStatusListener(away)
	srv.Stop()
	testwait.Recv(t, away, 10*time.Second, "the client noticing the broker is gone")
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if err := h.StopAccepting(short); err == nil {
		t.Fatal("StopAccepting was confirmed without a broker")
	}

	back := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(back)
	srv.Restart()
	testwait.Recv(t, back, 10*time.Second, "the client reconnecting")
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, connect(t, srv), testPrefix)
	if _, err := c.roundTrip("echo", nil, []byte("still accepting")); err != nil {
		t.Fatalf("an open after the StopAccepting that drained nothing: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.StopAccepting(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.open("echo", nil, 0); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("open after StopAccepting: %v, want no responders", err)
	}
}
