package primaries

import (
	"slices"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/actors"
)

// Producer returns the hollywood producer of the primary's actor. Every actor it
// produces plays the role of this Primary, one at a time: an actor restarted in place
// after a panic (actors.Recover), or a fresh instance spawned after the last one was
// poisoned, carries on the micro service, the calls in flight, the commands under way
// and the answers they owe (role.go).
//
// The actor obeys the role messages of package actors, each answered to its sender:
//   - actors.Serve{Epoch}: adopt the epoch in Config.Fence (when set), then subscribe
//     and confirm at the broker; reply actors.Accepting{On: true}, or actors.ServeFailed
//     (a stale epoch subscribes nothing). While serving, a Serve with another epoch
//     adopts it and keeps serving.
//   - actors.StopAccepting{Deadline}: end the subscriptions at the broker (confirmed) and
//     reply actors.Accepting{On: false}; then answer every call already received and reply
//     actors.Drained once none is in flight. Calls still running at Deadline are
//     cancelled, and Drained follows once they have returned. A zero Deadline waits for
//     the calls (or a Stop).
//   - actors.Stop: cancel running calls at once, end the subscriptions (drained: what
//     the broker had routed here is refused, retryably), confirm at the broker; reply
//     actors.Down.
//
// Role commands run in the order received, each once the broker step of the one before
// has reported; the actor never blocks, the steps run on goroutines it starts. Send
// them with Context.Send, not Request: StopAccepting is answered twice. The actor's
// Stopped message leaves the Primary serving: send Stop before poisoning the actor, or
// Close the Primary.
func (p *Primary) Producer() actor.Producer {
	return func() actor.Receiver { return &primaryActor{p: p, gone: make(chan struct{})} }
}

// Spawn spawns the primary's actor on e as the engine does: kind "primary", the
// service's name as id, under actors.Recover.
func (p *Primary) Spawn(e *actor.Engine) *actor.PID {
	return e.Spawn(p.Producer(), "primary", actors.SpawnOpts(p.svc.Name)...)
}

// primaryActor is one instance of the primary's actor. Its role state is the
// Primary's (roleState); the instance itself owns only whether it plays the role.
type primaryActor struct {
	p *Primary
	// inert: started after Close had begun. It takes no part in the role and answers
	// every command as a closed primary would.
	inert bool
	// gone is closed when this instance, having played the role, stops: a method
	// waiting for its answer then knows none will come (actors.AwaitRole).
	gone chan struct{}
}

var _ actors.Restarter = (*primaryActor)(nil)

func (a *primaryActor) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Started:
		a.started(c)
		return
	case actor.Stopped:
		a.stopped()
		return
	case actor.Initialized:
		return
	}
	var cmd *actors.RoleCommand
	switch m := c.Message().(type) {
	case actors.Serve, actors.StopAccepting, actors.Stop, actors.RoleAsk:
		cmd, _ = actors.TakeRole(m, c.Sender())
	case *actors.RoleStep:
		if !a.inert {
			a.finish(c, m)
			a.publish()
		}
		return
	default:
		return
	}
	if a.inert {
		a.refuse(c, cmd)
		return
	}
	a.take(c, cmd)
	a.publish()
}

// started makes this instance the one that plays the role, unless Close has begun, and
// carries on from the role the last instance left.
func (a *primaryActor) started(c *actor.Context) {
	stop := false
	a.p.view.Update(func(v view) (view, bool) {
		if v.closed {
			a.inert = true
			return v, false
		}
		v.live, v.pid, v.engine = a, c.PID(), c.Engine()
		stop, v.stopAsked = v.stopAsked, false
		return v, true
	})
	if a.inert {
		return
	}
	a.resume(c, stop)
	a.publish()
}

// Restart is the in-place restart of actors.Recover after a panic. The instance owns
// no goroutine or timer (the steps are the Primary's: they report to the same PID, which
// the restart keeps), so it only carries on as a fresh instance would.
func (a *primaryActor) Restart(c *actor.Context) {
	if a.inert {
		return
	}
	a.resume(c, false)
	a.publish()
}

// stopped is the instance's end: it no longer plays the role. The Primary keeps
// serving; the next instance, or Close, takes over.
func (a *primaryActor) stopped() {
	wasLive := false
	a.p.view.Update(func(v view) (view, bool) {
		if v.live != a {
			return v, false
		}
		wasLive = true
		v.live, v.pid, v.engine = nil, nil, nil
		return v, true
	})
	if wasLive {
		close(a.gone)
	}
}

// resume carries on the role as the Primary kept it. A step that finished while no
// instance ran reported to no one (a poisoned actor's mailbox is gone), so its result is
// taken from the step; later reports reach this instance, as it is registered under the
// same PID before it starts. When Stop was called while no instance ran (stop: the word
// it left in the view), or a run was cancelled without its Stop under way (a crash in
// between), the runs that still subscribe are stopped now.
func (a *primaryActor) resume(c *actor.Context, stop bool) {
	r := &a.p.role
	var finished []*actors.RoleStep
	for _, s := range r.steps {
		if s.Finished() {
			finished = append(finished, s)
		}
	}
	for _, s := range finished {
		a.finish(c, s)
	}
	for _, run := range r.runs {
		if (stop || run.ctx.Err() != nil) && !run.stopping && !r.queue.StopQueued() {
			a.take(c, &actors.RoleCommand{Msg: actors.Stop{}})
			break
		}
	}
	a.next(c)
}

// refuse answers a command as a closed primary does.
func (a *primaryActor) refuse(c *actor.Context, cmd *actors.RoleCommand) {
	switch cmd.Msg.(type) {
	case actors.Serve:
		a.answer(c, cmd, ErrClosed)
	case actors.StopAccepting:
		a.answer(c, cmd, nil)
		a.drained(c, cmd.From)
	default:
		a.answer(c, cmd, nil)
	}
}

// publish stores the view of the role, when it changed, for the methods to read.
func (a *primaryActor) publish() {
	r := &a.p.role
	a.p.view.Update(func(v view) (view, bool) {
		if v.live != a || (v.phase == r.phase && sameRuns(v.runs, r.runs) && slices.Equal(v.steps, r.steps)) {
			return v, false
		}
		v.phase = r.phase
		v.runs = make([]runView, len(r.runs))
		for i, run := range r.runs {
			v.runs[i] = viewOf(run)
		}
		v.steps = slices.Clone(r.steps)
		return v, true
	})
}

func sameRuns(vs []runView, runs []*run) bool {
	if len(vs) != len(runs) {
		return false
	}
	for i, rv := range vs {
		if rv != viewOf(runs[i]) {
			return false
		}
	}
	return true
}

// viewOf is run as the view shows it.
func viewOf(run *run) runView {
	return runView{run: run, draining: run.draining, stopping: run.stopping, ms: run.ms}
}
