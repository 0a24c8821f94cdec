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
// (package actors' member protocol: RolePhase, RoleQueue, StartStep) are the actor's
// own fields; the subscriptions and the call count live in the Member,
// so an actor restarted after a panic carries on with them.

// StopBound bounds a Stop (fencing, the end of a drain): the Python engine's bound on
// stopping its discovery primary.
const StopBound = 10 * time.Second

// pending limits of a subscription: calls wait there while every slot is busy.
const (
	pendingMsgsLimit  = 65536
	pendingBytesLimit = 64 << 20
)

// The results of the steps, in their actors.RoleStep; unsubscribed comes from the stop
// step before its end.
type (
	subscribed struct {
		subs []*nats.Subscription
		err  error
	}
	unsubscribed struct{ err error }
	answered     struct{ err error }
)

// Spawn spawns the member's actor on e.
func (m *Member) Spawn(e *actor.Engine) *actor.PID {
	return e.Spawn(func() actor.Receiver { return &memberActor{m: m, phase: actors.RoleIdle} }, "discovery", actors.SpawnOpts(m.cfg.Project)...)
}

type memberActor struct {
	m     *Member
	eng   *actor.Engine
	self  *actor.PID
	phase actors.RolePhase // idle, serving or stopped: the steps run between them
	queue actors.RoleQueue // the command whose step runs, and those waiting for it
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
			a.phase = actors.RoleServing
		}
	case actors.Serve, actors.StopAccepting, actors.Stop:
		cmd, _ := actors.TakeRole(msg, c.Sender())
		a.command(cmd)
	case *actors.RoleStep:
		switch r := msg.Result().(type) {
		case subscribed:
			a.subscribed(r)
		case answered:
			a.answered(r)
		}
	case unsubscribed:
		if msg.err != nil {
			a.m.log.Warn("the broker did not confirm the end of discovery's subscriptions", zap.Error(msg.err))
		}
		for _, p := range a.accepting {
			a.eng.Send(p, actors.Accepting{From: a.self, On: false})
		}
		a.accepting = nil
	}
}

// answered ends the stop step: every call is answered, or its bound passed.
func (a *memberActor) answered(m answered) {
	if m.err != nil {
		a.m.log.Warn("discovery stopped with calls unanswered", zap.Error(m.err))
	}
	a.queue.Done()
	a.phase = actors.RoleStopped
	for _, p := range a.drained {
		a.eng.Send(p, actors.Drained{From: a.self})
	}
	for _, p := range a.down {
		a.eng.Send(p, actors.RoleReply(actors.Stop{}, a.self, nil))
	}
	a.drained, a.down = nil, nil
	a.next()
}

// Restart implements actors.Restarter: a step running goes on and reports to the same
// PID; the commands that waited for it are lost with the panic, and the root's phase
// deadlines move on without their replies.
func (a *memberActor) Restart(c *actor.Context) {
	a.eng, a.self = c.Engine(), c.PID()
}

func (a *memberActor) command(cmd *actors.RoleCommand) {
	if cur := a.queue.Current(); cur != nil && !isServe(cur) && a.queue.Waiting() == 0 {
		// A stop runs and nothing waits behind it: a Stop or StopAccepting waits for the
		// same end. Behind a Serve that waits, it must stop what that Serve subscribes.
		switch cmd.Msg.(type) {
		case actors.Stop:
			a.down = append(a.down, cmd.From)
			return
		case actors.StopAccepting:
			a.drained = append(a.drained, cmd.From)
			cmd.Answer(a.eng, a.self, nil)
			return
		}
	}
	a.queue.Push(cmd)
	a.next()
}

func (a *memberActor) next() { a.queue.Run(a.run) }

func isServe(cmd *actors.RoleCommand) bool {
	_, ok := cmd.Msg.(actors.Serve)
	return ok
}

// run begins cmd: it answers at once, or starts its step and reports true.
func (a *memberActor) run(cmd *actors.RoleCommand) bool {
	switch msg := cmd.Msg.(type) {
	case actors.Serve:
		if a.phase == actors.RoleServing {
			cmd.Answer(a.eng, a.self, nil)
			return false
		}
		a.accepting = []*actor.PID{cmd.From} // the Serve's sender, answered by subscribed
		s, ok := actors.StartStep(a.m.steps, a.eng, a.self, cmd, func() any {
			subs, err := a.m.subscribe()
			return subscribed{subs: subs, err: err}
		})
		a.m.subscribing = s
		return ok // the group is never shut
	case actors.StopAccepting:
		if a.phase != actors.RoleServing {
			cmd.Answer(a.eng, a.self, nil)
			a.eng.Send(cmd.From, actors.Drained{From: a.self})
			return false
		}
		a.accepting, a.drained = []*actor.PID{cmd.From}, []*actor.PID{cmd.From}
		return a.stop(cmd, msg.Deadline)
	case actors.Stop:
		if a.phase != actors.RoleServing {
			cmd.Answer(a.eng, a.self, nil)
			return false
		}
		a.down = []*actor.PID{cmd.From}
		return a.stop(cmd, time.Now().Add(StopBound))
	}
	return false
}

// start runs work as cmd's step on a goroutine of the member's steps group.
func (a *memberActor) start(cmd *actors.RoleCommand, work func() any) bool {
	_, ok := actors.StartStep(a.m.steps, a.eng, a.self, cmd, work)
	return ok // the group is never shut
}

func (a *memberActor) subscribed(m subscribed) {
	a.queue.Done()
	a.m.subscribing = nil
	to := a.accepting
	a.accepting = nil
	if m.err == nil {
		a.m.subs, a.phase = m.subs, actors.RoleServing
	}
	for _, p := range to {
		a.eng.Send(p, actors.RoleReply(actors.Serve{}, a.self, m.err))
	}
	a.next()
}

// stop ends the subscriptions and waits for every call, by deadline at the latest.
func (a *memberActor) stop(cmd *actors.RoleCommand, deadline time.Time) bool {
	subs := a.m.subs
	a.m.subs = nil
	eng, self := a.eng, a.self
	return a.start(cmd, func() any {
		err := a.m.stopDelivery(deadline, subs, func(uerr error) { eng.Send(self, unsubscribed{err: uerr}) })
		return answered{err: err}
	})
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

// Close ends what the member still serves, once its actor is gone (the engine poisons
// it first): the subscriptions, confirmed, and the steps and calls running, waited for
// until ctx ends.
func (m *Member) Close(ctx context.Context) error {
	var errs []error
	if err := m.steps.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("discovery: a role step still runs: %w", err))
	}
	if s := m.subscribing; s != nil && s.Finished() {
		// Its report went to the stopped actor: what it subscribed is still ours to end.
		if r, ok := s.Result().(subscribed); ok && r.err == nil {
			m.subs = append(m.subs, r.subs...)
		}
		m.subscribing = nil
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
