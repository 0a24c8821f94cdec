package primaries

import (
	"context"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/sessions"
)

// ServeFailed answers actors.Serve when the primary could not subscribe or the broker
// did not confirm the subscriptions; the root tells it Serve again after a pause.
type ServeFailed = actors.ServeFailed

// outMsg is a reply waiting to be sent by the actor. It is built when sent, with the
// PID of the actor instance that sends it.
type outMsg struct {
	to    *actor.PID
	build func(from *actor.PID) any
}

// wake tells the actor that the outbox has replies.
type wake struct{}

// Producer returns the hollywood producer of the primary's actor. Every actor it
// produces works on this Primary, so an actor restarted after a panic (or respawned
// with the same producer) takes over the micro service, the calls in flight, the role
// steps under way and the replies not yet sent.
//
// The actor obeys the role messages of package actors, each answered to its sender:
//   - actors.Serve: subscribe and confirm at the broker; reply actors.Accepting{On: true},
//     or ServeFailed.
//   - actors.StopAccepting{Deadline}: end the subscriptions at the broker (confirmed) and
//     reply actors.Accepting{On: false}; then answer every call already received and reply
//     actors.Drained once none is in flight. Calls still running at Deadline are
//     cancelled, and Drained follows once they have returned. A zero Deadline waits for
//     the calls (or a Stop).
//   - actors.Stop: cancel running calls at once, end the subscriptions (drained: what
//     the broker had routed here is refused, retryably), confirm at the broker; reply
//     actors.Down.
//
// Role messages are executed in the order received; the actor never blocks, the broker
// round trips run on goroutines of the Primary. Send them with Context.Send, not
// Request: StopAccepting is answered twice. The actor's Stopped message (a restart
// sends it too) leaves the Primary serving: send Stop before poisoning the actor.
func (p *Primary) Producer() actor.Producer {
	return func() actor.Receiver { return &primaryActor{p: p} }
}

type primaryActor struct{ p *Primary }

var _ actors.Restarter = (*primaryActor)(nil)

// Restart is the in-place restart of actors.Recover after a panic: the actor owns no
// goroutine or timer of its own (they belong to the Primary), so it only takes the
// Primary up again as a fresh instance would.
func (a *primaryActor) Restart(c *actor.Context) { a.start(c) }

func (a *primaryActor) start(c *actor.Context) {
	a.p.attach(c.Engine(), c.PID())
	a.p.flushOutbox()
}

func (a *primaryActor) Receive(c *actor.Context) {
	p := a.p
	switch m := c.Message().(type) {
	case actor.Started:
		a.start(c)
	case wake:
		p.flushOutbox()
	case actors.Serve:
		p.roleServe(c.Sender())
	case actors.StopAccepting:
		p.roleStopAccepting(c.Sender(), m.Deadline)
	case actors.Stop:
		p.roleStop(c.Sender())
	}
}

// attach records the engine and PID of the current actor instance.
func (p *Primary) attach(e *actor.Engine, pid *actor.PID) {
	p.amu.Lock()
	p.engine, p.pid = e, pid
	p.amu.Unlock()
}

// post queues a reply and wakes the actor. If the actor is gone, the next instance
// sends it when it starts.
func (p *Primary) post(to *actor.PID, build func(from *actor.PID) any) {
	if to == nil {
		return
	}
	p.amu.Lock()
	p.outbox = append(p.outbox, outMsg{to: to, build: build})
	e, pid := p.engine, p.pid
	p.amu.Unlock()
	if e != nil {
		e.Send(pid, wake{})
	}
}

// flushOutbox sends every queued reply; it runs on the actor's goroutine.
func (p *Primary) flushOutbox() {
	p.amu.Lock()
	out, e, pid := p.outbox, p.engine, p.pid
	p.outbox = nil
	p.amu.Unlock()
	for _, m := range out {
		e.SendWithSender(m.to, m.build(pid), pid)
	}
}

// step runs f on a new goroutine once every role step received before it has done its
// ordered part; f calls done when its own ordered part is over (work after that, such
// as waiting for the drain, no longer holds up later steps).
func (p *Primary) step(f func(done func())) {
	p.amu.Lock()
	prev := p.roleTail
	next := make(chan struct{})
	p.roleTail = next
	p.amu.Unlock()
	p.roles.Add(1)
	go func() {
		defer p.roles.Done()
		<-prev
		var closed bool
		done := func() {
			if !closed {
				closed = true
				close(next)
			}
		}
		defer done()
		f(done)
	}()
}

func (p *Primary) roleServe(to *actor.PID) {
	p.step(func(func()) {
		if err := p.Serve(context.Background()); err != nil {
			p.post(to, func(from *actor.PID) any { return ServeFailed{From: from, Err: err} })
			return
		}
		p.post(to, func(from *actor.PID) any { return actors.Accepting{From: from, On: true} })
	})
}

func (p *Primary) roleStopAccepting(to *actor.PID, deadline time.Time) {
	p.step(func(done func()) {
		ctx := context.Background()
		if !deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		r, _ := p.stopAccepting(ctx) // not confirmed: the drain below still answers what arrives
		p.post(to, func(from *actor.PID) any { return actors.Accepting{From: from, On: false} })
		done()
		if r != nil && r.finished(ctx) != nil {
			r.cancel(errDrainDeadline)
			// The cancelled calls return promptly; calls still arriving from the buffers
			// are refused without running.
			_ = r.calls.wait(context.Background())
		}
		p.prune()
		p.post(to, func(from *actor.PID) any { return actors.Drained{From: from} })
	})
}

// reconnectBound bounds how long a fencing Stop waits for the connection to come back
// before it ends the subscriptions anyway.
const reconnectBound = time.Minute

func (p *Primary) roleStop(to *actor.PID) {
	// Cancelling needs no lock and no I/O, so running calls stop now even if an earlier
	// step still waits for the broker.
	for _, r := range p.loadRuns() {
		r.cancel(errStopped)
	}
	p.step(func(func()) {
		// A fence often comes with a broker that went away: end the subscriptions once
		// the connection is back (sessions.WaitConnected says why). Until then nothing
		// reaches us, and what arrives after the reconnect is refused by the cancelled
		// run, retryably.
		wctx, wcancel := context.WithTimeout(context.Background(), reconnectBound)
		_ = sessions.WaitConnected(wctx, p.cfg.Conn)
		wcancel()
		p.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		// Confirming the UNSUB makes the next request get "no responders"; if the
		// connection is closed or down there is nothing left to confirm.
		_ = p.cfg.Conn.FlushWithContext(ctx)
		cancel()
		p.post(to, func(from *actor.PID) any { return actors.Down{From: from} })
	})
}
