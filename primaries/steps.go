package primaries

// The broker steps of the role. The actor starts each on a goroutine of its own (start);
// a step does I/O and waits, changes nothing of the role, and reports its result by
// message. The next step starts from the mailbox.

import (
	"context"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

const (
	// flushTimeout bounds a broker round trip when the step's context has no deadline.
	flushTimeout = 10 * time.Second
	// reconnectBound bounds how long a step waits for the connection to come back
	// before it ends the subscriptions anyway.
	reconnectBound = time.Minute
)

// start runs work on a new goroutine as a step of the role (of cmd; nil for a drain
// wait) and reports whether it did. The Primary's steps group owns it (Close waits for
// it), and its report (the actors.RoleStep, which keeps the result for the instance
// that follows a poisoned one: resume) goes to this actor's PID, which an in-place
// restart and a respawn under the same kind and id keep.
func (a *primaryActor) start(c *actor.Context, cmd *actors.RoleCommand, work func() any) bool {
	p := a.p
	s, ok := actors.StartStep(p.steps, c.Engine(), c.PID(), cmd, work)
	if !ok { // the steps group is never shut; should it be, the command fails rather than hangs
		if cmd != nil {
			a.answer(c, cmd, fmt.Errorf("primaries: %q: %s: no step can start: %w", p.svc.Name, cmd.Name(), ErrClosed))
		}
		return false
	}
	p.role.steps = append(p.role.steps, s)
	return true
}

// stepContext is the context of a step: parent's (a method's bound), else the Primary's
// lifetime; ended at deadline when it is set, and whenever Close gives up waiting.
func (p *Primary) stepContext(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = p.base
	}
	ctx, cancel := context.WithCancelCause(parent)
	unhook := context.AfterFunc(p.base, func() { cancel(context.Cause(p.base)) })
	cancelDeadline := context.CancelFunc(func() {})
	if !deadline.IsZero() {
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
	}
	return ctx, func() {
		cancelDeadline()
		unhook()
		cancel(nil)
	}
}

// subscribe adopts epoch in the service's shared backend (Config.Fence), then adds
// the run's micro service, unless ms is the one an earlier Serve added, and confirms
// its subscriptions with a broker round trip. A failed adoption adds nothing.
func (p *Primary) subscribe(ctx context.Context, r *run, ms micro.Service, epoch uint64) subscribed {
	if p.cfg.Fence != nil {
		if res := p.adopt(ctx, epoch); res.err != nil {
			return subscribed{run: r, ms: ms, err: res.err}
		}
	}
	p.maxPayload.Store(p.cfg.Conn.MaxPayload())
	if ms == nil {
		var err error
		if ms, err = p.addService(r); err != nil {
			return subscribed{run: r, err: err}
		}
	}
	if err := flush(ctx, p.cfg.Conn); err != nil {
		return subscribed{run: r, ms: ms, err: fmt.Errorf("primaries: confirm the subscriptions of %q: %w", p.svc.Name, err)}
	}
	return subscribed{run: r, ms: ms, epoch: epoch}
}

// adopt adopts epoch in the service's shared backend.
func (p *Primary) adopt(ctx context.Context, epoch uint64) adopted {
	if err := p.cfg.Fence.AdoptEpoch(ctx, epoch); err != nil {
		return adopted{epoch: epoch, err: fmt.Errorf("primaries: %q: adopt epoch %d: %w", p.svc.Name, epoch, err)}
	}
	return adopted{epoch: epoch}
}

// addService adds the micro service of run r, one endpoint per operation.
func (p *Primary) addService(r *run) (micro.Service, error) {
	ms, err := micro.AddService(p.cfg.Conn, micro.Config{
		Name:         p.svc.Name,
		Version:      protocol.ServiceVersion,
		Description:  p.svc.Description,
		Metadata:     map[string]string{"instance_id": p.cfg.InstanceID},
		StatsHandler: func(*micro.Endpoint) any { return p.stats() },
	})
	if err != nil {
		return nil, fmt.Errorf("primaries: add micro service %q: %w", p.svc.Name, err)
	}
	for _, name := range p.ops {
		subject := protocol.ServiceSubject(p.svc.Name, name)
		if err := ms.AddEndpoint(name, p.handler(r, name, p.svc.Operations[name]), micro.WithEndpointSubject(subject),
			micro.WithEndpointPendingLimits(pendingMsgsLimit, pendingBytesLimit)); err != nil {
			_ = ms.Stop()
			return nil, fmt.Errorf("primaries: add endpoint %s: %w", subject, err)
		}
	}
	return ms, nil
}

// stopAccepting ends the run's subscriptions and confirms the UNSUB: micro's Stop
// drains them (queues the UNSUB and keeps delivering what was routed before it), then
// confirmReceived proves the broker processed it.
func (p *Primary) stopAccepting(ctx context.Context, r *run, ms micro.Service) unsubConfirmed {
	p.waitConnected(ctx)
	if err := ms.Stop(); err != nil {
		r.allReceived()
		return unsubConfirmed{run: r, err: fmt.Errorf("primaries: stop accepting %q: %w", p.svc.Name, err)}
	}
	if err := p.confirmReceived(ctx, r); err != nil {
		return unsubConfirmed{run: r, err: fmt.Errorf("primaries: confirm that %q stopped accepting: %w", p.svc.Name, err)}
	}
	return unsubConfirmed{run: r}
}

// ending is a run whose subscriptions a Stop ends, with its micro service (nil when
// none was added), read by the actor when it began the step.
type ending struct {
	run *run
	ms  micro.Service
}

// endRuns ends the subscriptions of Stop's runs, drained, and confirms the UNSUB. A
// fence often comes with a broker that went away: the subscriptions end once the
// connection is back. Until then nothing reaches us, and what arrives after the
// reconnect is refused by the cancelled runs, retryably. Confirming the UNSUB makes the
// next request get "no responders"; a closed or failed connection has nothing left to
// deliver.
func (p *Primary) endRuns(ctx context.Context, runs []ending) {
	if len(runs) == 0 {
		return
	}
	p.waitConnected(ctx)
	var ended []*run
	for _, e := range runs {
		if e.ms == nil || e.ms.Stop() != nil { // Stop fails only on a closed connection
			e.run.allReceived()
			continue
		}
		ended = append(ended, e.run)
	}
	if len(ended) > 0 {
		_ = p.confirmReceived(ctx, ended...)
	}
}

// waitConnected waits, by reconnectBound at most, until the connection is up or
// closed: draining while it reconnects leaves a subscription at the broker that
// swallows calls (sessions.WaitConnected says how). If that takes too long, the caller
// drains anyway.
func (p *Primary) waitConnected(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, reconnectBound)
	defer cancel()
	_ = sessions.WaitConnected(ctx, p.cfg.Conn)
}

// confirmReceived closes the runs' received once every call the broker routed to
// their drained subscriptions before the UNSUB has reached the callback: a flush round
// trip proves the broker processed the UNSUB, and after its PONG every such call sits
// in a subscription's pending list. The barrier runs once each has been handed to its
// callback, which counts the call before it returns; from then on a run's counter sees
// every call it will ever get. On an error received is closed at once.
func (p *Primary) confirmReceived(ctx context.Context, runs ...*run) error {
	all := func() {
		for _, r := range runs {
			r.allReceived()
		}
	}
	if err := flush(ctx, p.cfg.Conn); err != nil {
		all()
		return err
	}
	if err := p.cfg.Conn.Barrier(all); err != nil {
		all()
	}
	return nil
}

// flush is a broker round trip bounded by ctx, or by flushTimeout when ctx has no
// deadline.
func flush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}
