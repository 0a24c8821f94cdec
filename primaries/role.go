package primaries

// The primary's role as its actor plays it: the phase, the role command whose broker
// step runs and those waiting behind it, the runs, and the step reports that move it
// on. Everything here runs in Receive (actor.go).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/epoch"
)

// roleState is the role. It lives in the Primary rather than in the actor so that the
// instance spawned after the last one was poisoned carries on the commands under way
// and answers their senders (docs/design.md §3); the instance restarted in place after a panic
// keeps it anyway. Only Receive touches it: instances never overlap (the next starts
// once the last has stopped), and Close touches it only once no instance can run.
type roleState struct {
	phase   actors.RolePhase
	queue   actors.RoleQueue   // the command whose broker step runs, and those received since
	steps   []*actors.RoleStep // steps under way or finished, whose report is not handled yet
	runs    []*run             // runs not yet finished, oldest first; at most the last accepts
	stopped bool               // the last command to finish was a Stop
	closed  bool               // Close: Serve is refused from now on
	// epoch is the epoch adopted in Config.Fence for the run that accepts, when
	// adopted is set; a Stop unsets it, so the next Serve adopts again.
	epoch   uint64
	adopted bool
}

// accepting is the run that takes new calls, or nil.
func (r *roleState) accepting() *run {
	if n := len(r.runs); n > 0 && !r.runs[n-1].stopping {
		return r.runs[n-1]
	}
	return nil
}

// The results of the steps (steps.go), which reach the actor inside their *step.
type (
	// subscribed: the epoch was adopted in Config.Fence (when there is one), the micro
	// service was added (ms, nil when that or the adoption failed) and, when err is
	// nil, the broker confirmed its subscriptions.
	subscribed struct {
		run   *run
		ms    micro.Service
		epoch uint64
		err   error
	}
	// adopted: a serving primary adopted epoch in Config.Fence, or err.
	adopted struct {
		epoch uint64
		err   error
	}
	// unsubConfirmed: the run's subscriptions were drained and the broker confirmed the
	// UNSUB (err says what failed).
	unsubConfirmed struct {
		run *run
		err error
	}
	// drained: the run has answered everything it received (and, cancelled, its
	// workers have returned), or err: the step's context ended first.
	drained struct {
		run *run
		err error
	}
	// down: Stop's runs have ended their subscriptions and the UNSUB was confirmed (or
	// the connection is gone).
	down struct{}
)

// take receives a role command: its immediate part now, its step once the commands
// before it are done.
func (a *primaryActor) take(c *actor.Context, cmd *actors.RoleCommand) {
	r := &a.p.role
	if cmd.Stops() {
		// Cancelling needs no I/O, so running calls stop now even while an earlier step
		// still waits for the broker. Every run is drained once the step begins, so
		// SessionsFinished waits from now on for what is still routed to it.
		for _, run := range r.runs {
			run.cancel(errStopped)
			run.draining = true
		}
		if cmd.Closes() {
			r.closed = true
		}
		r.adopted = false // the next Serve adopts its epoch again
		if _, ok := cmd.Msg.(actors.Stop); ok && cmd.Reply != nil {
			a.publish()
			cmd.Answer(c, c.PID(), nil) // Stop the method returns once the command is taken
		}
	}
	r.queue.Push(cmd)
	a.next(c)
}

// next begins the commands waiting, in order, until one starts a broker step.
func (a *primaryActor) next(c *actor.Context) {
	a.p.role.queue.Run(func(cmd *actors.RoleCommand) bool { return a.begin(c, cmd) })
	a.settle()
}

// begin starts cmd's broker step and reports true, or answers it at once when there is
// nothing to do.
func (a *primaryActor) begin(c *actor.Context, cmd *actors.RoleCommand) (stepped bool) {
	p, r := a.p, &a.p.role
	switch m := cmd.Msg.(type) {
	case actors.Serve:
		if r.closed {
			a.answer(c, cmd, fmt.Errorf("primaries: serve %q: %w", p.svc.Name, ErrClosed))
			return false
		}
		run := r.accepting()
		if run != nil && run.confirmed {
			if p.cfg.Fence == nil || (r.adopted && r.epoch == m.Epoch) {
				a.answer(c, cmd, nil)
				return false
			}
			// Serving, told another epoch (a deferred bump): adopt it, keep serving.
			ctx, cancel := p.stepContext(cmd.Ctx, time.Time{})
			ctx = adoptContext(ctx, m)
			return a.start(c, cmd, func() any { defer cancel(); return p.adopt(ctx, m.Epoch) })
		}
		if run == nil {
			run = newRun()
			// Listed before it subscribes, so its calls count in InFlight from the first.
			r.runs = append(r.runs, run)
		}
		ctx, cancel := p.stepContext(cmd.Ctx, time.Time{})
		ctx = adoptContext(ctx, m)
		ms := run.ms // set when an earlier Serve added it but the broker did not confirm
		return a.start(c, cmd, func() any { defer cancel(); return p.subscribe(ctx, run, ms, m.Epoch) })
	case actors.StopAccepting:
		run := r.accepting()
		if run == nil {
			a.answer(c, cmd, nil)
			a.drained(c, cmd.From)
			return false
		}
		run.stopping, run.draining = true, true
		ctx, cancel := p.stepContext(cmd.Ctx, m.Deadline)
		ms := run.ms
		return a.start(c, cmd, func() any { defer cancel(); return p.stopAccepting(ctx, run, ms) })
	case actors.Stop, actors.CloseRole:
		var runs []ending
		for _, run := range r.runs {
			if !run.stopping {
				run.stopping = true
				runs = append(runs, ending{run: run, ms: run.ms})
			}
		}
		if len(runs) == 0 {
			a.down(c, cmd)
			return false
		}
		ctx, cancel := p.stepContext(cmd.Ctx, time.Time{})
		return a.start(c, cmd, func() any { defer cancel(); p.endRuns(ctx, runs); return down{} })
	}
	return false
}

// finish handles the report of step s (once: resume may have handled it already).
func (a *primaryActor) finish(c *actor.Context, s *actors.RoleStep) {
	r := &a.p.role
	i := slices.Index(r.steps, s)
	if i < 0 {
		return
	}
	r.steps = slices.Delete(r.steps, i, i+1)
	switch m := s.Result().(type) {
	case subscribed:
		a.subscribed(c, m)
	case adopted:
		a.adopted(c, m)
	case unsubConfirmed:
		a.unsubConfirmed(c, m)
	case drained:
		a.runDrained(c, m)
	case down:
		a.down(c, a.done())
	}
	a.next(c)
}

// done ends the command in progress and returns it.
func (a *primaryActor) done() *actors.RoleCommand { return a.p.role.queue.Done() }

func (a *primaryActor) subscribed(c *actor.Context, m subscribed) {
	cmd, run := a.done(), m.run
	switch {
	case m.ms == nil: // not added: the run never served
		a.forget(run, m.err)
	case m.err == nil:
		run.ms, run.confirmed = m.ms, true
		a.p.role.stopped = false
		a.p.role.epoch, a.p.role.adopted = m.epoch, true
	default:
		// Added but not confirmed: the run stays, its subscriptions reach the broker
		// with the connection (ending them while it reconnects would be unsafe, see
		// sessions.WaitConnected), and the next Serve confirms again.
		run.ms = m.ms
	}
	a.answer(c, cmd, m.err)
}

// adopted answers a Serve that adopted another epoch while serving. A failed adoption
// leaves the run serving under the epoch it had: the store refuses its writes, and
// the lease machine finds this engine lost.
func (a *primaryActor) adopted(c *actor.Context, m adopted) {
	cmd := a.done()
	if m.err == nil {
		a.p.role.epoch, a.p.role.adopted = m.epoch, true
	}
	a.answer(c, cmd, m.err)
}

func (a *primaryActor) unsubConfirmed(c *actor.Context, m unsubConfirmed) {
	cmd := a.done()
	a.answer(c, cmd, m.err) // confirmed or not, the drain answers what arrives
	if cmd.From != nil {
		m.run.drainTo = append(m.run.drainTo, cmd.From)
	}
	a.watch(c, m.run, cmd.Deadline())
}

func (a *primaryActor) runDrained(c *actor.Context, m drained) {
	run := m.run
	run.watched = false
	if m.err != nil {
		if a.p.base.Err() != nil {
			return // Close gave up waiting for it
		}
		// The drain deadline passed: cancel what still runs. The cancelled calls return
		// promptly; calls still arriving from the buffers are refused without running.
		run.cancel(errDrainDeadline)
		a.watch(c, run, time.Time{})
		return
	}
	for _, to := range run.drainTo {
		a.drained(c, to)
	}
	run.drainTo = nil
	if run.ctx.Err() != nil { // stopped, everything answered, every worker returned
		a.drop(run)
	}
}

// down answers a Stop (or Close) whose runs have ended their subscriptions, and has the
// cancelled runs watched until they can be forgotten.
func (a *primaryActor) down(c *actor.Context, cmd *actors.RoleCommand) {
	r := &a.p.role
	r.stopped = true
	// Before the answer: Close, told next, waits for these steps too.
	for _, run := range r.runs {
		if run.ctx.Err() != nil && !run.watched {
			a.watch(c, run, time.Time{})
		}
	}
	a.answer(c, cmd, nil)
}

// watch starts the step that waits until run has answered everything routed to it, by
// deadline when one is set.
func (a *primaryActor) watch(c *actor.Context, run *run, deadline time.Time) {
	p := a.p
	run.watched = true
	ctx, cancel := p.stepContext(nil, deadline)
	a.start(c, nil, func() any { defer cancel(); return drained{run: run, err: run.finished(ctx, true)} })
}

// forget drops a run that never served.
func (a *primaryActor) forget(run *run, err error) {
	run.cancel(err)
	run.allReceived()
	a.drop(run)
}

// drop removes a finished run from the role.
func (a *primaryActor) drop(done *run) {
	r := &a.p.role
	if i := slices.Index(r.runs, done); i >= 0 {
		r.runs = slices.Delete(r.runs, i, i+1)
	}
}

// answer tells cmd's sender how its command ended (actors.RoleCommand.Answer); a
// method's caller reads the view next, so it is published first.
func (a *primaryActor) answer(c *actor.Context, cmd *actors.RoleCommand, err error) {
	if cmd.Reply != nil && !a.inert {
		a.settle()
		a.publish()
	}
	cmd.Answer(c, c.PID(), err)
}

// drained tells a StopAccepting sender that the run it stopped has nothing left open.
func (a *primaryActor) drained(c *actor.Context, to *actor.PID) {
	if to != nil {
		c.Send(to, actors.Drained{From: c.PID()})
	}
}

// settle sets the phase from the role.
func (a *primaryActor) settle() {
	r := &a.p.role
	switch cur := r.queue.Current(); {
	case cur != nil:
		switch cur.Msg.(type) {
		case actors.Serve:
			r.phase = actors.RoleSubscribing
			if run := r.accepting(); run != nil && run.confirmed {
				r.phase = actors.RoleServing // adopting another epoch while serving
			}
		case actors.StopAccepting:
			r.phase = actors.RoleStoppingAccepting
		default:
			r.phase = actors.RoleStopping
		}
	case r.closed:
		r.phase = actors.RoleClosed
	case r.accepting() != nil:
		r.phase = actors.RoleServing
	case r.stopped:
		r.phase = actors.RoleStopped
	case slices.ContainsFunc(r.runs, func(run *run) bool { return run.watched }):
		r.phase = actors.RoleDraining
	default:
		r.phase = actors.RoleIdle
	}
}

// adoptContext marks the adoption of a Serve's epoch as one the engine took as new
// (epoch.Taken), unless the epoch is a draining engine's that the stores hold already:
// a store found at a taken epoch was written by another engine, which must be passed.
func adoptContext(ctx context.Context, m actors.Serve) context.Context {
	if m.Shared || m.Epoch == 0 {
		return ctx
	}
	return epoch.Taken(ctx)
}
