package primaries

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/actors"
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
		err := p.askLive(ctx, v, actors.CloseRole{})
		if !errors.Is(err, ErrNoActor) {
			return err
		}
		// The actor stopped before it answered; no instance takes the role any more.
	}
	return p.stopAlone(ctx)
}

// stopAlone stops the role once no actor instance can play it: the last one has
// stopped (the view says so, which orders its last Receive, and so its last publish,
// before this) and none starts after Close began. It works from that published view
// and changes nothing of the role, which is the actor's: it cancels every run, waits
// for the steps the actor started, and ends the subscriptions itself. The senders of
// commands still under way get no answer: their actor is gone.
func (p *Primary) stopAlone(ctx context.Context) error {
	last := p.view.Load()
	for _, rv := range last.runs {
		rv.run.cancel(errStopped)
	}
	waitErr := p.steps.Wait(ctx)
	// Even cut short, end what can be ended: a step still running keeps its result.
	added := map[*run]micro.Service{} // micro services no actor was told of
	for _, s := range last.steps {
		if !s.Finished() {
			continue
		}
		if m, ok := s.Result().(subscribed); ok && m.ms != nil {
			added[m.run] = m.ms
		}
	}
	var end []ending // the steps of StopAccepting and Stop have ended the others
	runs := make([]runView, len(last.runs))
	for i, rv := range last.runs {
		if !rv.stopping {
			ms := rv.ms
			if m := added[rv.run]; m != nil {
				ms = m
			}
			end = append(end, ending{run: rv.run, ms: ms})
		}
		runs[i] = runView{run: rv.run, draining: true, stopping: true, ms: rv.ms}
	}
	p.endRuns(ctx, end)
	p.view.Update(func(v view) (view, bool) {
		v.phase, v.runs, v.steps = actors.RoleClosed, runs, nil
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
	if err := p.steps.Wait(ctx); err != nil {
		return fmt.Errorf("steps still running: %w", err)
	}
	for _, rv := range p.view.Load().runs {
		if err := rv.run.finished(ctx, true); err != nil {
			return fmt.Errorf("calls still running: %w", err)
		}
	}
	return nil
}
