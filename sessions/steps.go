package sessions

// The broker steps of the role commands. Each runs on a goroutine of the host's steps
// group, never in the host actor's Receive, and reports back with stepDone.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/protocol"
)

// The explicit pending limits of every subscription of a host. Its callbacks never
// wait (they decode, count and hand over; beyond MaxCallsInFlight they refuse), so the
// buffer fills only when the process cannot keep up at all; what it then drops is
// counted (abi_engine_dropped_messages_total) and logged.
const (
	pendingMsgsLimit  = 65536
	pendingBytesLimit = 64 << 20
)

// stepKind names a broker step.
type stepKind int

const (
	stepSubscribe   stepKind = iota + 1 // Serve: subscribe what is missing, then flush
	stepUnsubscribe                     // StopAccepting: UNSUB <prefix>.open, then confirm
	stepStop                            // Stop, Close: UNSUB everything, flush, wait for the handlers
)

// stepRun is the host actor's record of the step running: its kind and what to undo
// when it fails. The step itself (its command and, once done, its stepResult) is the
// actors.RoleStep; the host actor reads the result once it has the report, or, if it
// stopped first, the goroutine it leaves behind reads it once the step is done.
type stepRun struct {
	kind   stepKind
	from   actors.RolePhase // the phase before the step
	began  bool             // a Serve that began the epoch (undone if it fails)
	cancel context.CancelFunc
	s      *actors.RoleStep
}

// result waits for the step's result.
func (r *stepRun) result() stepResult {
	res, _ := r.s.Result().(stepResult)
	return res
}

// stepResult is what a step did.
type stepResult struct {
	owner []*nats.Subscription // subscribe: the owner-scoped subscriptions it made
	open  *nats.Subscription   // subscribe: <prefix>.open, if it made it
	err   error
}

func (r stepResult) subs() []*nats.Subscription {
	subs := append([]*nats.Subscription(nil), r.owner...)
	if r.open != nil {
		subs = append(subs, r.open)
	}
	return subs
}

// startStep runs f as the step of cmd on a goroutine of the host's steps group, with a
// context bounded by cmd's (the host's life for a role message) and its deadline, ended
// by Close, and cancelled by a Stop that comes meanwhile. It reports whether the step runs.
func (a *hostActor) startStep(kind stepKind, cmd *actors.RoleCommand, from actors.RolePhase, began bool, f func(context.Context) stepResult) bool {
	h := a.h
	parent := cmd.Ctx
	if parent == nil {
		parent = h.life
	}
	ctx, cancel := withDeadline(parent, cmd.Deadline())
	release := context.AfterFunc(h.life, cancel)
	run := &stepRun{kind: kind, from: from, began: began, cancel: cancel}
	s, ok := actors.StartStep(h.steps, a.eng, a.self, cmd, func() any {
		defer release()
		defer cancel()
		return f(ctx)
	})
	if !ok { // h.steps is never shut; should it be, the command fails rather than hangs
		cancel()
		release()
		a.phase = from
		a.answer(cmd, fmt.Errorf("transfer host %s: %s: no step can start: %w", h.prefix, cmd.Name(), ErrClosed))
		return false
	}
	run.s = s
	a.step = run
	return true
}

// withDeadline is ctx with deadline, if it is set.
func withDeadline(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline)
}

// subscribe is Serve's step: the owner-scoped subjects and <prefix>.open, as asked,
// then a round trip that proves the broker has them. A failure ends what it made.
func (h *TransferHost) subscribe(ctx context.Context, owner, open bool) stepResult {
	var r stepResult
	fail := func(err error) stepResult {
		for _, s := range r.subs() {
			_ = s.Unsubscribe()
		}
		return stepResult{err: err}
	}
	if owner {
		for _, op := range []string{protocol.TransferWrite, protocol.TransferStart, protocol.TransferRead, protocol.TransferClose} {
			subject := OwnerSubject(h.prefix, h.owner, op)
			sub, err := h.nc.Subscribe(subject, func(m *nats.Msg) { h.route(op, m) })
			if err == nil {
				err = sub.SetPendingLimits(pendingMsgsLimit, pendingBytesLimit)
			}
			if err != nil {
				return fail(fmt.Errorf("transfer host %s: subscribe %s: %w", h.prefix, subject, err))
			}
			r.owner = append(r.owner, sub)
		}
	}
	if open {
		sub, err := h.nc.QueueSubscribe(OpenSubject(h.prefix), OwnersQueue(h.prefix), h.routeOpen)
		if err == nil {
			err = sub.SetPendingLimits(pendingMsgsLimit, pendingBytesLimit)
		}
		if err != nil {
			return fail(fmt.Errorf("transfer host %s: subscribe %s: %w", h.prefix, OpenSubject(h.prefix), err))
		}
		r.open = sub
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, confirmTimeout)
		defer cancel()
	}
	if err := h.nc.FlushWithContext(ctx); err != nil {
		return fail(fmt.Errorf("transfer host %s: the broker did not confirm its subscriptions: %w", h.prefix, err))
	}
	return r
}

// unsubscribe is Stop's step: every subscription ends, what is pending is dropped on
// purpose (Unsubscribe, not Drain), then one short round trip.
func (h *TransferHost) unsubscribe(subs []*nats.Subscription) {
	for _, s := range subs {
		if err := s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			h.log.Warn("unsubscribe failed", zap.String("subject", s.Subject), zap.Error(err))
		}
	}
	if len(subs) > 0 && !h.nc.IsClosed() {
		// The round trip lets callers get "no responders" from now on rather than a
		// timeout. Not worth waiting long for, nor a warning when it fails (at an exit
		// after the broker went away, at fencing): the subscriptions are gone here
		// anyway, and the broker drops them with the connection.
		if err := h.nc.FlushTimeout(stopFlushTimeout); err != nil {
			h.log.Info("the broker did not confirm the UNSUBs of a stopped transfer host", zap.Error(err))
		}
	}
}
