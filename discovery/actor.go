package discovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/sessions"
)

// The member's role, played by its hollywood actor: Serve subscribes the eight
// subjects (and a round trip proves the broker has them); StopAccepting and Stop end
// them the same way, because a discovery call is short and every call received must be
// answered: the UNSUBs are confirmed by the broker first (sessions.StopDelivery), so
// nothing routed to this engine is lost, then the subscriptions' pending messages are
// handled and every call answered. StopAccepting is bounded by its drain deadline;
// Stop (fencing) by StopBound. The phase, the step running and the commands waiting
// are the actor's own fields; the subscriptions and the call count live in the Member,
// so an actor restarted after a panic carries on with them.

// StopBound bounds a Stop (fencing, the end of a drain): the Python engine's bound on
// stopping its discovery primary.
const StopBound = 10 * time.Second

// pending limits of a subscription: calls wait there while every slot is busy.
const (
	pendingMsgsLimit  = 65536
	pendingBytesLimit = 64 << 20
)

type phase int

const (
	phaseIdle phase = iota
	phaseServing
	phaseStopped
)

type (
	subscribed struct {
		subs []*nats.Subscription
		err  error
	}
	unsubscribed struct{ err error }
	answered     struct{ err error }
)

type roleCmd struct {
	msg  any
	from *actor.PID
}

// Spawn spawns the member's actor on e.
func (m *Member) Spawn(e *actor.Engine) *actor.PID {
	return e.Spawn(func() actor.Receiver { return &memberActor{m: m} }, "discovery", actors.SpawnOpts(m.cfg.Project)...)
}

type memberActor struct {
	m     *Member
	eng   *actor.Engine
	self  *actor.PID
	phase phase
	step  string // "subscribe" or "stop" while one runs
	queue []roleCmd
	// Who waits for the running stop step: Accepting{false} once the UNSUBs are
	// confirmed, then Drained or Down once every call is answered.
	accepting, drained, down []*actor.PID
}

var _ actors.Restarter = (*memberActor)(nil)

func (a *memberActor) Receive(c *actor.Context) {
	switch msg := c.Message().(type) {
	case actor.Initialized, actor.Stopped:
	case actor.Started:
		a.eng, a.self = c.Engine(), c.PID()
		if len(a.m.subs) > 0 {
			a.phase = phaseServing
		}
	case actors.Serve, actors.StopAccepting, actors.Stop:
		a.command(roleCmd{msg: msg, from: c.Sender()})
	case subscribed:
		a.subscribed(msg)
	case unsubscribed:
		if msg.err != nil {
			a.m.log.Warn("the broker did not confirm the end of discovery's subscriptions", zap.Error(msg.err))
		}
		for _, p := range a.accepting {
			a.eng.Send(p, actors.Accepting{From: a.self, On: false})
		}
		a.accepting = nil
	case answered:
		if msg.err != nil {
			a.m.log.Warn("discovery stopped with calls unanswered", zap.Error(msg.err))
		}
		a.step, a.phase = "", phaseStopped
		for _, p := range a.drained {
			a.eng.Send(p, actors.Drained{From: a.self})
		}
		for _, p := range a.down {
			a.eng.Send(p, actors.Down{From: a.self})
		}
		a.drained, a.down = nil, nil
		a.next()
	}
}

// Restart implements actors.Restarter: a step running goes on and reports to the same
// PID; the commands that waited for it are lost with the panic, and the root's phase
// deadlines move on without their replies.
func (a *memberActor) Restart(c *actor.Context) {
	a.eng, a.self = c.Engine(), c.PID()
}

func (a *memberActor) command(cmd roleCmd) {
	if a.step == "stop" {
		// A stop runs: a Stop or StopAccepting waits for the same end.
		switch cmd.msg.(type) {
		case actors.Stop:
			a.down = append(a.down, cmd.from)
			return
		case actors.StopAccepting:
			a.drained = append(a.drained, cmd.from)
			a.eng.Send(cmd.from, actors.Accepting{From: a.self, On: false})
			return
		}
	}
	if a.step != "" {
		a.queue = append(a.queue, cmd)
		return
	}
	a.run(cmd)
}

func (a *memberActor) next() {
	for a.step == "" && len(a.queue) > 0 {
		cmd := a.queue[0]
		a.queue = a.queue[1:]
		a.run(cmd)
	}
}

func (a *memberActor) run(cmd roleCmd) {
	switch msg := cmd.msg.(type) {
	case actors.Serve:
		if a.phase == phaseServing {
			a.eng.Send(cmd.from, actors.Accepting{From: a.self, On: true})
			return
		}
		a.step, a.queue = "subscribe", append([]roleCmd{}, a.queue...)
		a.accepting = []*actor.PID{cmd.from} // the Serve's sender, answered by subscribed
		a.m.stepStarted()
		go func() {
			defer a.m.stepEnded()
			subs, err := a.m.subscribe()
			a.eng.Send(a.self, subscribed{subs: subs, err: err})
		}()
	case actors.StopAccepting:
		if a.phase != phaseServing {
			a.eng.Send(cmd.from, actors.Accepting{From: a.self, On: false})
			a.eng.Send(cmd.from, actors.Drained{From: a.self})
			return
		}
		a.accepting, a.drained = []*actor.PID{cmd.from}, []*actor.PID{cmd.from}
		a.stop(msg.Deadline)
	case actors.Stop:
		if a.phase != phaseServing {
			a.eng.Send(cmd.from, actors.Down{From: a.self})
			return
		}
		a.down = []*actor.PID{cmd.from}
		a.stop(time.Now().Add(StopBound))
	}
}

func (a *memberActor) subscribed(m subscribed) {
	a.step = ""
	to := a.accepting
	a.accepting = nil
	if m.err != nil {
		for _, p := range to {
			a.eng.Send(p, actors.ServeFailed{From: a.self, Err: m.err})
		}
		a.next()
		return
	}
	a.m.subs, a.phase = m.subs, phaseServing
	for _, p := range to {
		a.eng.Send(p, actors.Accepting{From: a.self, On: true})
	}
	a.next()
}

// stop ends the subscriptions and waits for every call, by deadline at the latest.
func (a *memberActor) stop(deadline time.Time) {
	subs := a.m.subs
	a.m.subs = nil
	a.step = "stop"
	a.m.stepStarted()
	go func() {
		defer a.m.stepEnded()
		err := a.m.stopDelivery(deadline, subs, func(uerr error) { a.eng.Send(a.self, unsubscribed{err: uerr}) })
		a.eng.Send(a.self, answered{err: err})
	}()
}

// subscribe subscribes the eight subjects in the queue group, then makes a round trip
// that proves the broker has them. A failure ends what it made.
func (m *Member) subscribe() ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	fail := func(err error) ([]*nats.Subscription, error) {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		return nil, err
	}
	for _, op := range Operations {
		subject := Subject(m.cfg.Project, op)
		s, err := m.cfg.Conn.QueueSubscribe(subject, Queue(m.cfg.Project), m.deliver(op))
		if err == nil {
			err = s.SetPendingLimits(pendingMsgsLimit, pendingBytesLimit)
		}
		if err != nil {
			return fail(fmt.Errorf("discovery: subscribe %s: %w", subject, err))
		}
		subs = append(subs, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StopBound)
	defer cancel()
	if err := m.cfg.Conn.FlushWithContext(ctx); err != nil {
		return fail(fmt.Errorf("discovery: the broker did not confirm the subscriptions: %w", err))
	}
	return subs, nil
}

// stopDelivery ends subs at the broker, calls confirmed once the broker has confirmed
// it (with the confirmation's failure, if any), and returns once every call they
// delivered is answered, or with the wait's error at deadline.
func (m *Member) stopDelivery(deadline time.Time, subs []*nats.Subscription, confirmed func(error)) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	d, uerr := sessions.StopDelivery(ctx, m.cfg.Conn, subs...)
	confirmed(uerr)
	if err := d.Wait(ctx); err != nil {
		return err
	}
	return m.callsAnswered(ctx)
}

func (m *Member) stepStarted() {
	m.mu.Lock()
	m.steps++
	if m.steps == 1 {
		m.stepsIdle = make(chan struct{})
	}
	m.mu.Unlock()
}

func (m *Member) stepEnded() {
	m.mu.Lock()
	if m.steps--; m.steps == 0 {
		close(m.stepsIdle)
	}
	m.mu.Unlock()
}

// Close ends what the member still serves, once its actor is gone (the engine poisons
// it first): the subscriptions, confirmed, and the steps and calls running, waited for
// until ctx ends.
func (m *Member) Close(ctx context.Context) error {
	m.mu.Lock()
	steps := m.stepsIdle
	m.mu.Unlock()
	var errs []error
	if steps != nil {
		select {
		case <-steps:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("discovery: a role step still runs: %w", ctx.Err()))
		}
	}
	if subs := m.subs; len(subs) > 0 {
		m.subs = nil
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(StopBound)
		}
		err := m.stopDelivery(deadline, subs, func(uerr error) { errs = append(errs, uerr) })
		errs = append(errs, err)
	} else if err := m.callsAnswered(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
