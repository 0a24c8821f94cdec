package primaries

import (
	"context"
	"errors"
	"fmt"
)

// Close stops the primary for good and waits, bounded by ctx, for every goroutine it or
// its actor started: the steps, the calls and the workers. The actor stops the role as
// actors.Stop does and refuses Serve from then on; when no actor runs (it was poisoned,
// or never spawned), Close stops the role itself, and no instance spawned later takes
// it. If ctx ends first, the steps still under way are cut short and Close returns
// ctx's error. The actor belongs to its spawner, which poisons it, before or after
// Close. Safe to call more than once; calls wait for each other.
func (p *Primary) Close(ctx context.Context) error {
	select {
	case p.closing <- struct{}{}:
		defer func() { <-p.closing }()
	case <-ctx.Done():
		return fmt.Errorf("primaries: close %q: %w", p.svc.Name, context.Cause(ctx))
	}
	unhook := context.AfterFunc(ctx, func() {
		p.cancelBase(fmt.Errorf("primaries: close %q: %w", p.svc.Name, context.Cause(ctx)))
	})
	defer unhook()
	err := p.closeRole(ctx)
	if err == nil {
		err = p.quiesce(ctx)
	}
	if err != nil {
		return fmt.Errorf("primaries: close %q: %w", p.svc.Name, err)
	}
	p.cancelBase(ErrClosed)
	return nil
}

// closeRole has the live actor stop the role for good, or stops it here when none runs.
func (p *Primary) closeRole(ctx context.Context) error {
	var v view
	p.view.Update(func(old view) (view, bool) {
		v = old
		old.closed = true
		return old, !v.closed
	})
	if v.live != nil {
		reply := make(chan error, 1)
		v.engine.Send(v.pid, ask{msg: closeCmd{}, ctx: ctx, reply: reply})
		err := p.await(ctx, v.live, reply)
		if !errors.Is(err, ErrNoActor) {
			return err
		}
		// The actor stopped before it answered; no instance takes the role any more.
	}
	return p.stopAlone(ctx)
}

// stopAlone stops the role once no actor instance can play it: the last one has
// stopped (the view says so, which orders its last Receive before this) and none starts
// after Close began. It cancels every run, waits for the steps the actor started, and
// ends the subscriptions itself. The senders of commands still under way get no
// answer: their actor is gone.
func (p *Primary) stopAlone(ctx context.Context) error {
	r := &p.role
	for _, run := range r.runs {
		run.cancel(errStopped)
		run.draining = true
	}
	waitErr := p.steps.wait(ctx)
	// Even cut short, end what can be ended: a step still running keeps its result.
	for _, s := range r.steps {
		select {
		case <-s.done:
		default:
			continue
		}
		if m, ok := s.result.(subscribed); ok && m.ms != nil {
			m.run.ms = m.ms // a micro service no actor was told of
		}
	}
	r.steps = r.steps[:0]
	var end []*run // the steps of StopAccepting and Stop have ended the others
	for _, run := range r.runs {
		if !run.stopping {
			run.stopping = true
			end = append(end, run)
		}
	}
	p.endRuns(ctx, end)
	r.cur, r.queue, r.closed, r.phase = nil, nil, true, phaseClosed
	runs := make([]runView, len(r.runs))
	for i, run := range r.runs {
		runs[i] = runView{run: run, draining: true}
	}
	p.view.Update(func(v view) (view, bool) {
		v.phase, v.runs = phaseClosed, runs
		return v, true
	})
	if waitErr != nil {
		return fmt.Errorf("steps still running: %w", waitErr)
	}
	return nil
}

// quiesce waits until every step has ended and every run has answered everything and
// its workers have returned.
func (p *Primary) quiesce(ctx context.Context) error {
	if err := p.steps.wait(ctx); err != nil {
		return fmt.Errorf("steps still running: %w", err)
	}
	for _, rv := range p.view.Load().runs {
		if err := rv.run.finished(ctx, true); err != nil {
			return fmt.Errorf("calls still running: %w", err)
		}
	}
	return nil
}
