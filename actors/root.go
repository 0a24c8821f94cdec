package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/notify"
	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
)

// The root actor drives the HandoverMachine (rootmachine.go, handover.go,
// successor.go): it feeds it the ownership's role broadcasts, the members' replies, its
// timers and what its waits return, each with the clock's now, and carries out the
// HandoverOutput each step returns (the messages, the timers, the waits, the end). It
// never compares phases and reads the ownership only through its broadcasts;
// docs/architecture.md draws the cascades.

// RootConfig is what the root actor sequences.
type RootConfig struct {
	Ownership *Ownership
	// Jobs is the jobs host; optional.
	Jobs *actor.PID
	// Members obey the role messages: every ServicePrimary and every session host.
	Members []*actor.PID
	// Drain bounds how long received calls and open sessions may take after the
	// release (drain_seconds; 0 closes them at once).
	Drain time.Duration
	// Successor confirms that holder, the engine that took the lease after our
	// release, now answers at the broker on the shared subscriptions of our members
	// (its micro services, listing every endpoint of ours). It must return when its ctx
	// ends. Optional: nil skips the successor phase, and the members stop accepting
	// right after the release.
	Successor func(ctx context.Context, holder lease.Holder) error
	// AnyStandby reports whether any engine stands by to take the lease (the control
	// roll call), asked as the handover begins: with none, the successor phase is
	// skipped and the members stop accepting right after the release, as nobody will
	// subscribe in their place. It must return when its ctx ends. Optional: nil waits
	// for a successor as if one stood by.
	AnyStandby func(ctx context.Context) (bool, error)
	// Sessions is the second wait for sessions over every host (a call answered during
	// the first wait can park an overflowing reply on a host already done). It must
	// return when its ctx ends. Optional.
	Sessions func(ctx context.Context) error
	// OnPhase sees each handover phase's duration, on the root's goroutine. Optional.
	OnPhase func(phase Phase, d time.Duration)
	Logger  *zap.Logger
	// Clock is the time the cascade's deadlines run on; nil is the real one. The
	// deadline a member is told (StopAccepting's) is that clock's mapped back to the
	// real time line, on which the members count.
	Clock Clock
	// Failpoints hosts release-before-jobs, serve-after-release and skip-successor;
	// nil: none.
	Failpoints *failpoint.Set
}

// Root is the handle on the engine's root actor. Its methods read the snapshot the
// actor publishes; only the actor changes the cascade.
type Root struct {
	cfg    RootConfig
	engine *actor.Engine
	pid    *actor.PID
	log    *zap.Logger
	clock  Clock

	// machine is the cascade. Root (the spawner) owns it so that a root restarted after
	// a panic carries on where it was; only the actor's Receive touches it.
	machine *HandoverMachine
	// nextHolder is the ownership's watch for a successor, run by the successor's wait.
	nextHolder func(ctx context.Context) (lease.Holder, error)
	view       *notify.Value[rootView]
	ended      chan struct{} // closed by the actor once it has published the end

	// waits counts the goroutines the root starts (the roll call, the wait for a
	// successor, the second wait for sessions); Stopped cancels them through
	// stopWaits, and Close waits for them.
	waits     *Group
	waitsCtx  context.Context
	stopWaits context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// SpawnRoot spawns the root actor; it subscribes itself to the ownership.
func SpawnRoot(e *actor.Engine, cfg RootConfig) (*Root, error) {
	if cfg.Ownership == nil {
		return nil, errors.New("actors: the root actor needs the ownership")
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real()
	}
	// What the root needs of the ownership is taken here, once: its PID, its lease
	// configuration and its watch for a successor, and its status to publish until the
	// first StatusChanged comes. From here on the root knows the ownership only from its
	// broadcasts.
	m := newHandoverMachine(handoverConfig{
		ownership: cfg.Ownership.PID(), jobs: cfg.Jobs, members: cfg.Members, drain: cfg.Drain,
		lease:     cfg.Ownership.Config(),
		successor: cfg.Successor != nil, sessions: cfg.Sessions != nil, rollCall: cfg.AnyStandby != nil,
		faults: rootFaults(cfg.Failpoints),
	})
	m.status = cfg.Ownership.Status()
	waitsCtx, stopWaits := context.WithCancel(context.Background())
	r := &Root{
		cfg: cfg, engine: e, log: log.Named("root"), clock: clk, machine: m,
		nextHolder: cfg.Ownership.NextHolder,
		view:       notify.New(m.view(rootView{})),
		ended:      make(chan struct{}),
		waits:      NewGroup(), waitsCtx: waitsCtx, stopWaits: stopWaits,
	}
	r.pid = e.Spawn(func() actor.Receiver { return &rootActor{r: r, m: m} }, "root", SpawnOpts("engine")...)
	return r, nil
}

// PID is the root actor.
func (r *Root) PID() *actor.PID { return r.pid }

// Ended is closed when the engine must end: after a handover, or on its own when the
// lease was lost or a standby's claim ended (Err says which).
func (r *Root) Ended() <-chan struct{} { return r.ended }

// Err is why the engine ended on its own (*lease.LostError, *lease.StandbyTimeoutError,
// or *lease.AlreadyServingError for a standby that another engine of its rollout beat to
// the released lease), nil after a handover or while running.
func (r *Root) Err() error { return r.view.Load().err }

// Phase is the handover phase in progress: PhaseRelaying before a handover, PhaseDone
// after it.
func (r *Root) Phase() Phase { return r.view.Load().phase }

// State is the role the engine's members carry out: StateServing only once every member
// and the jobs host have confirmed the last Serve (the services answer), and until then
// the state before it (idle, standby, fenced). Leaving serving shows first in the
// ownership's status, which the root hears of after it.
func (r *Root) State() lease.State { return r.view.Load().state }

// RootView is one snapshot the root actor published: the ownership's status as the
// root last heard it (StatusChanged), and the root's phase, the state its members carry
// out (State) and its failing members (Failing). The actor publishes it at the end of
// every Receive that changed any of them, so its fields are of one moment: a reader
// never sees a lease status of one moment beside a phase of another.
type RootView struct {
	Lease   Status
	Phase   Phase
	State   lease.State
	Failing []MemberFailure
}

// View is the snapshot the root last published (RootView).
func (r *Root) View() RootView {
	v := r.view.Load()
	return RootView{Lease: v.lease, Phase: v.phase, State: v.state, Failing: v.failing}
}

// Handover starts the cascade and waits until it is done or ctx ends. Calling it
// again waits for the same cascade.
func (r *Root) Handover(ctx context.Context) error {
	r.engine.Send(r.pid, Handover{})
	select {
	case <-r.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: handover in phase %s: %w", r.Phase(), ctx.Err())
	}
}

// Epoch is the epoch the members were last told to serve under (0 before the first
// Serve).
func (r *Root) Epoch() uint64 { return r.view.Load().epoch }

// WaitServing waits until every member and the jobs host have confirmed the last
// Serve: the engine takes calls.
func (r *Root) WaitServing(ctx context.Context) error {
	from := r.view.Load().served
	v, err := r.view.Wait(ctx, func(v rootView) bool { return v.up || v.served > from || v.ended })
	switch {
	case err != nil:
		return fmt.Errorf("actors: waiting for the services to serve: %w", err)
	case v.up || v.served > from:
		return nil
	case v.err != nil:
		return v.err
	}
	return errors.New("actors: the engine ended before it served")
}

// Close stops the root for good: it poisons the actor (whose Stopped stops its timers
// and cancels its waits: the roll call, the waits for a successor and for sessions) and
// waits for those waits to return, bounded by ctx. It is safe to call more than once.
func (r *Root) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		<-r.engine.PoisonCtx(ctx, r.pid).Done()
		if ctx.Err() != nil {
			r.closeErr = fmt.Errorf("actors: stopping the root actor: %w", ctx.Err())
			return
		}
		if err := r.waits.Wait(ctx); err != nil {
			r.closeErr = fmt.Errorf("actors: a wait of the handover did not return: %w", err)
		}
	})
	return r.closeErr
}

// rootActor drives the machine. Its timers are its own: the phase deadline, replaced
// when the machine's deadline moves, a Serve retry per member, and the messages a fail point
// holds back; all stop on Stopped and on a restart, which arms the deadline again.
type rootActor struct {
	r          *Root
	m          *HandoverMachine
	phaseTimer clock.Timer
	armed      PhaseDeadline          // what phaseTimer fires for
	retries    map[string]clock.Timer // members to tell Serve again, by PID string
	held       []clock.Timer          // fail points' messages held back
}

func (a *rootActor) Receive(c *actor.Context) {
	switch msg := c.Message().(type) {
	case actor.Started:
		c.Send(a.m.cfg.ownership, Subscribe{PID: c.PID()})
	case actor.Stopped:
		a.stopTimers()
		a.r.stopWaits() // Close waits for them
		// The ownership outlives the root (the teardown stops the root first): its
		// status changes, one a renewal, must not reach a root that is gone.
		c.Send(a.m.cfg.ownership, Unsubscribe{PID: c.PID()})
		return
	case retryServe:
		delete(a.retries, msg.to.String())
		a.apply(c, a.m.Step(a.r.clock.Now(), msg))
	default:
		a.apply(c, a.m.Step(a.r.clock.Now(), msg))
	}
	a.publish()
}

// Restart implements Restarter. The machine is in Root, so only the timers are the
// instance's: they are stopped and the phase deadline armed again (a phase waiting on a
// message the panic dropped is moved on by it). The root subscribes again, which brings
// the current role: a role change the panic dropped is not missed, and a Serve to retry
// is sent again with it. A wait goes on; it reports to the same PID.
func (a *rootActor) Restart(c *actor.Context) {
	a.stopTimers()
	a.arm(c, a.m.Deadline())
	c.Send(a.m.cfg.ownership, Subscribe{PID: c.PID()})
	a.publish()
}

// apply carries out one step's output, in its order.
func (a *rootActor) apply(c *actor.Context, out HandoverOutput) {
	log := a.r.log
	for _, err := range out.Illegal {
		log.Error("handover: a move its table does not allow", zap.Error(err))
	}
	for _, l := range out.Logs {
		if ce := log.Check(l.Level, l.Msg); ce != nil {
			ce.Write(l.Fields...)
		}
	}
	if a.r.cfg.OnPhase != nil {
		for _, p := range out.Phases {
			a.r.cfg.OnPhase(p.Phase, p.D)
		}
	}
	if out.StopRetries {
		a.stopRetries()
	}
	for _, s := range out.Sends {
		c.Send(s.To, a.onRealTime(s.Msg))
	}
	e, self := c.Engine(), c.PID()
	for _, rt := range out.Retries {
		key, to := rt.To.String(), rt.To
		if t := a.retries[key]; t != nil {
			t.Stop()
		}
		if a.retries == nil {
			a.retries = map[string]clock.Timer{}
		}
		a.retries[key] = a.after(rt.At, func() { e.Send(self, retryServe{to: to}) })
	}
	for _, h := range out.Held {
		msg, pids := a.onRealTime(h.Msg), h.To
		a.held = append(a.held, a.after(h.At, func() {
			for _, pid := range pids {
				e.SendWithSender(pid, msg, self)
			}
		}))
	}
	for _, w := range out.Waits {
		a.startWait(c, w)
	}
	a.arm(c, out.Deadline)
	if out.End {
		a.publish() // Err is readable once Ended is closed
		close(a.r.ended)
	}
}

// after calls f once the root's clock reads at.
func (a *rootActor) after(at time.Time, f func()) clock.Timer {
	c := a.r.clock
	return c.AfterFunc(at.Sub(c.Now()), f)
}

// onRealTime is msg as a member takes it: the machine counts on the root's clock, but
// a member bounds its drain by StopAccepting's deadline as a real time (a context, a
// timer), so that deadline is mapped back to the real time line.
func (a *rootActor) onRealTime(msg any) any {
	if sa, ok := msg.(StopAccepting); ok && !sa.Deadline.IsZero() {
		sa.Deadline = a.r.clock.Real(sa.Deadline)
		return sa
	}
	return msg
}

// arm arms the phase timer at d, replacing the one armed for another deadline.
func (a *rootActor) arm(c *actor.Context, d PhaseDeadline) {
	if d == a.armed && (a.phaseTimer != nil || d.At.IsZero()) {
		return
	}
	a.stopPhaseTimer()
	a.armed = d
	if d.At.IsZero() {
		return
	}
	e, self, p := c.Engine(), c.PID(), d.Phase
	a.phaseTimer = a.after(d.At, func() { e.Send(self, phaseDeadline{phase: p}) })
}

// startWait runs the wait w asks for on a goroutine of the root's, bounded by its
// deadline, and feeds the machine what it returns. Stopped cancels it and Close waits
// for it.
func (a *rootActor) startWait(c *actor.Context, w WaitStart) {
	r := a.r
	var wait func(ctx context.Context) any
	switch w.Kind {
	case WaitRollCall:
		ask := r.cfg.AnyStandby
		wait = func(ctx context.Context) any {
			found, err := ask(ctx)
			return rollCallDone{any: found, err: err}
		}
	case WaitSuccessor:
		next, confirm := r.nextHolder, r.cfg.Successor
		wait = func(ctx context.Context) any {
			h, err := next(ctx)
			if err == nil {
				if err = confirm(ctx, h); err != nil {
					err = fmt.Errorf("the new holder %s does not answer at the broker: %w", h, err)
				}
			}
			return successorDone{holder: h, err: err}
		}
	case WaitSessions:
		sessions := r.cfg.Sessions
		wait = func(ctx context.Context) any { return sessionsDone{err: sessions(ctx)} }
	default:
		return
	}
	ctx, cancel := context.WithDeadline(r.waitsCtx, r.clock.Real(w.Deadline))
	e, self := c.Engine(), c.PID()
	if !r.waits.Go(func() {
		defer cancel()
		e.Send(self, wait(ctx))
	}) {
		cancel() // never: the root's group is never shut
	}
}

// publish puts the machine's state where the handles read it.
func (a *rootActor) publish() {
	a.r.view.Update(func(old rootView) (rootView, bool) {
		v := a.m.view(old)
		// err is set once, with ended; errors need not be comparable.
		return v, v.lease != old.lease || v.phase != old.phase || v.state != old.state || v.up != old.up ||
			v.served != old.served || v.epoch != old.epoch || v.ended != old.ended || v.failGen != old.failGen
	})
}

func (a *rootActor) stopPhaseTimer() {
	if a.phaseTimer != nil {
		a.phaseTimer.Stop()
		a.phaseTimer = nil
	}
	a.armed = PhaseDeadline{}
}

func (a *rootActor) stopRetries() {
	for key, t := range a.retries {
		t.Stop()
		delete(a.retries, key)
	}
}

func (a *rootActor) stopTimers() {
	a.stopPhaseTimer()
	a.stopRetries()
	for _, t := range a.held {
		t.Stop()
	}
	a.held = nil
}
