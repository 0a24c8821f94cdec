package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/notify"
	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
)

// The root actor turns the ownership's role broadcasts into role commands for every
// member (serving and the fencing cascade, in roleChanged) and runs the handover
// cascade (handover and begin, in handover.go). Both cascades are written out above
// those functions as the messages they send and the replies they wait for;
// docs/architecture.md draws them.

// Phase is where the root stands in the handover cascade.
type Phase int

// The phases, in the order the cascade goes through them.
const (
	// PhaseRelaying: no handover asked for; the root relays role changes to the members.
	PhaseRelaying  Phase = iota + 1
	PhaseJobs            // jobs stop; runs in progress finish
	PhaseRelease         // the lease is released
	PhaseSuccessor       // we serve on until the new holder answers at the broker
	PhaseDrain           // shared subscriptions end; received calls and sessions finish
	PhaseSessions        // the second wait for sessions
	PhaseStop            // everything left is stopped
	PhaseDrained         // the epoch record is marked drained
	PhaseDone            // the handover is over: Ended is closed
)

var phaseNames = [...]string{
	PhaseRelaying:  "relaying",
	PhaseJobs:      "jobs",
	PhaseRelease:   "release",
	PhaseSuccessor: "successor",
	PhaseDrain:     "drain",
	PhaseSessions:  "sessions",
	PhaseStop:      "stop",
	PhaseDrained:   "drained",
	PhaseDone:      "done",
}

func (p Phase) String() string {
	if p >= PhaseRelaying && p <= PhaseDone {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// stopBound bounds the wait for members to confirm Stop: a member that never answers
// must not hold the process forever.
const stopBound = 5 * time.Second

// serveRetry is the pause before a member that failed to serve is told Serve again.
const serveRetry = 500 * time.Millisecond

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

	// st is the cascade's state. Root (the spawner) owns it so that a root restarted
	// after a panic carries on where it was; only the actor's Receive touches it.
	st    *cascade
	view  *notify.Value[rootView]
	ended chan struct{} // closed by the actor once it has published the end

	closeOnce sync.Once
	closeErr  error
}

// cascade is the root's role state.
type cascade struct {
	phase      Phase
	phaseStart time.Time
	deadline   time.Time       // the current phase's; zero for none
	waiting    map[string]bool // members (PID strings) the current phase waits for
	drainBy    time.Time       // the drain deadline, which the second wait for sessions keeps
	released   time.Time       // when the release was confirmed (the drain deadline counts from it)
	standbys   standbyCount    // what the roll call at the handover's start found

	// the serving period: Serve was sent, and these members have not confirmed it yet
	state     lease.State // what the members carry out (serving once all confirmed)
	up        bool        // every member confirmed the current period's Serve
	upWaiting map[string]bool
	served    uint64 // serving periods confirmed so far
	epoch     uint64 // the epoch the members were last told to serve under
	shared    bool   // it is a draining engine's (Serve.Shared)
	revision  uint64 // the lease revision of the last Serving, for the handover's log lines
	failing   failing
	failGen   uint64 // bumped on every change of failing, so publish sees it

	ended bool
	err   error

	// the goroutines the root starts: the wait for a successor (PhaseSuccessor) and
	// the second wait for sessions (PhaseSessions)
	waits []bgWait
}

// bgWait is one of the root's goroutines: Stopped cancels it, Close waits for it.
type bgWait struct {
	cancel context.CancelFunc
	done   chan struct{} // closed once it has returned
}

// rootView is the snapshot the handles read.
type rootView struct {
	phase  Phase
	state  lease.State
	up     bool
	served uint64
	epoch  uint64
	ended  bool
	err    error
	// failing is the members that could not serve (Failing); failGen its version.
	failing []MemberFailure
	failGen uint64
}

// Messages the root sends itself: from its timers and its sessions goroutine.
type (
	phaseDeadline struct{ phase Phase }
	sessionsDone  struct{ err error }
	successorDone struct {
		holder lease.Holder // the new holder, when the lease showed one
		err    error
	}
	rollCallDone struct {
		any bool
		err error
	}
	retryServe struct{ to *actor.PID }
)

// SpawnRoot spawns the root actor; it subscribes itself to the ownership.
func SpawnRoot(e *actor.Engine, cfg RootConfig) (*Root, error) {
	if cfg.Ownership == nil {
		return nil, errors.New("actors: the root actor needs the ownership")
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	st := &cascade{phase: PhaseRelaying, state: lease.StateIdle}
	r := &Root{
		cfg: cfg, engine: e, log: log.Named("root"), st: st,
		view:  notify.New(rootView{phase: st.phase, state: st.state}),
		ended: make(chan struct{}),
	}
	r.pid = e.Spawn(func() actor.Receiver { return &rootActor{r: r, st: st} }, "root", SpawnOpts("engine")...)
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
// and cancels the waits for a successor and for sessions) and waits for those waits to
// return, bounded by ctx. It is safe to call more than once.
func (r *Root) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		<-r.engine.PoisonCtx(ctx, r.pid).Done()
		if ctx.Err() != nil {
			r.closeErr = fmt.Errorf("actors: stopping the root actor: %w", ctx.Err())
			return
		}
		// The actor is gone (hollywood removes it before its Stopped, and ends the
		// poison's context after), so its cascade is ours to read.
		for _, w := range r.st.waits {
			select {
			case <-w.done:
			case <-ctx.Done():
				r.closeErr = fmt.Errorf("actors: a wait of the handover did not return: %w", ctx.Err())
				return
			}
		}
	})
	return r.closeErr
}

// rootActor is the root. Its timers are its own: stopped when the phase moves on, on
// Stopped and on a restart, which arms them again from the cascade.
type rootActor struct {
	r          *Root
	st         *cascade
	phaseTimer *time.Timer
	retries    map[string]*time.Timer // members to tell Serve again, by PID string
	held       []*time.Timer          // fail points' messages held back (failpoints.go)
}

func (a *rootActor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		c.Send(a.r.cfg.Ownership.PID(), Subscribe{PID: c.PID()})
	case actor.Stopped:
		a.stopTimers()
		for _, w := range a.st.waits {
			w.cancel() // Close waits for it
		}
		return
	case Serving, EpochChanged, StandingBy, Fenced, Lost, Released, ClaimFailed:
		a.roleChanged(c, m)
	case Accepting:
		if m.On {
			a.accepted(m.From)
			if m.From != nil && a.st.failing[m.From.String()].Member != "" {
				a.st.failing.served(m.From)
				a.st.failGen++
			}
		}
	case ServeFailed:
		a.serveFailed(c, m)
	case retryServe:
		delete(a.retries, m.to.String())
		if a.st.phase == PhaseRelaying && a.r.cfg.Ownership.Status().State == lease.StateServing {
			c.Send(m.to, Serve{Epoch: a.st.epoch, Shared: a.st.shared})
		}
	case Handover, Drained, Down, DrainMarked, phaseDeadline, sessionsDone, successorDone, rollCallDone:
		a.handover(c, m)
	}
	a.publish()
}

// Restart implements Restarter. The cascade is in Root, so only the timers are the
// instance's: they are stopped and the phase deadline armed again (a phase waiting on a
// message the panic dropped is moved on by it). The root subscribes again, which brings
// the current role: a role change the panic dropped is not missed, and a Serve to retry
// is sent again with it. A wait for a successor or for sessions goes on; it reports to
// the same PID.
func (a *rootActor) Restart(c *actor.Context) {
	a.stopTimers()
	a.armPhase(c)
	c.Send(a.r.cfg.Ownership.PID(), Subscribe{PID: c.PID()})
	a.publish()
}

// roleChanged relays a role change of the ownership to the members. It is the root's
// part of serving and of the fencing cascade (docs/architecture.md, cascade 2):
//
//	Serving      → Serve{Epoch} to every member and the jobs host; waits for
//	               Accepting{On: true} from each (ServeFailed: Serve again after
//	               serveRetry), then State is serving. Serving{Restored} after a fence is
//	               the same. Ignored once a handover has begun.
//	EpochChanged → Serve{Epoch} again to every member and the jobs host, serving already:
//	               each adopts the new epoch and confirms it, as for Serving (State
//	               stays serving meanwhile). Ignored unless serving, and once a handover
//	               has begun.
//	StandingBy   → nothing to tell; State is standby.
//	Fenced       → Stop to every member and the jobs host, at once; no reply awaited.
//	Lost         → Stop to every member and the jobs host; the engine ends with a
//	               *lease.LostError, unless a handover runs (it goes on to its end).
//	ClaimFailed  → the engine ends with the claim's error: it will never serve.
//	Released     → State is released; the handover's release phase moves on.
func (a *rootActor) roleChanged(c *actor.Context, msg any) {
	st := a.st
	switch m := msg.(type) {
	case Serving:
		if st.phase != PhaseRelaying {
			return
		}
		a.r.log.Info("serving", zap.Uint64("revision", m.Revision), zap.Uint64("epoch", m.Epoch), zap.Bool("restored", m.Restored))
		st.epoch, st.shared, st.revision = m.Epoch, m.Shared, m.Revision
		a.expectUp()
		a.fanOut(c, Serve{Epoch: m.Epoch, Shared: m.Shared}, true)
	case EpochChanged:
		if st.phase != PhaseRelaying || (!st.up && st.upWaiting == nil) {
			return
		}
		a.r.log.Info("serving under a new epoch", zap.Uint64("epoch", m.Epoch))
		st.epoch, st.shared = m.Epoch, false // a bump of our own
		a.expectUp()
		a.fanOut(c, Serve{Epoch: m.Epoch}, true)
	case StandingBy:
		st.state = lease.StateStandby
		a.clearFailing()
	case Fenced:
		a.notUp(lease.StateFenced)
		a.fanOut(c, Stop{}, true)
	case Lost:
		a.notUp(lease.StateLost)
		a.fanOut(c, Stop{}, true)
		if st.phase == PhaseRelaying {
			a.end(&lease.LostError{Holder: m.Holder})
		}
	case ClaimFailed:
		// The root exists once the claim stood by (or served): a claim that ends now is
		// a standby's, timed out or beaten to a released lease by an engine of its own
		// rollout. Either way it will never serve: end, as a refused engine does.
		a.end(m.Err)
	case Released:
		a.notUp(lease.StateReleased)
		a.handover(c, m)
	}
}

// expectUp starts a serving period: every member and the jobs host must confirm Serve.
func (a *rootActor) expectUp() {
	st := a.st
	a.stopRetries() // the Serve that follows reaches every member
	st.up = false
	st.upWaiting = map[string]bool{}
	for _, pid := range a.members(true) {
		st.upWaiting[pid.String()] = true
	}
	if len(st.upWaiting) == 0 {
		a.upNow()
	}
}

// accepted counts a member's confirmation of the period's Serve.
func (a *rootActor) accepted(from *actor.PID) {
	st := a.st
	if from == nil || !st.upWaiting[from.String()] {
		return
	}
	delete(st.upWaiting, from.String())
	if len(st.upWaiting) == 0 {
		a.upNow()
	}
}

func (a *rootActor) upNow() {
	st := a.st
	st.up, st.upWaiting, st.state = true, nil, lease.StateServing
	st.served++
}

// notUp ends a serving period: the members were told to stop, so the engine no longer
// serves, and confirmations of the period's Serve no longer count.
func (a *rootActor) notUp(s lease.State) {
	st := a.st
	st.state, st.up, st.upWaiting = s, false, nil
	a.stopRetries()
	a.clearFailing()
}

// serveFailed tells the member Serve again after a pause: a broker that is away comes
// back, and a fence or a handover meanwhile makes the retry moot.
func (a *rootActor) serveFailed(c *actor.Context, m ServeFailed) {
	if m.From == nil {
		return
	}
	// Once per run of failures with one error: the retry every serveRetry would
	// otherwise log twice a second for as long as the member cannot serve.
	prev, again := a.st.failing[m.From.String()]
	if again && prev.Err != nil && m.Err != nil && prev.Err.Error() == m.Err.Error() {
		a.r.log.Debug("a member could not serve; retrying", zap.Stringer("member", m.From), zap.Error(m.Err))
	} else {
		a.r.log.Warn("a member could not serve; retrying", zap.Stringer("member", m.From), zap.Error(m.Err))
	}
	if a.st.phase == PhaseRelaying && a.r.cfg.Ownership.Status().State == lease.StateServing {
		// The holder cannot serve this member's calls: not ready (Failing).
		a.st.failing.fail(m.From, m.Err, time.Now())
		a.st.failGen++
	}
	if stale := (*epoch.StaleError)(nil); errors.As(m.Err, &stale) && stale.Current >= a.st.epoch {
		// A store at our epoch refuses it only when we took it as new (epoch.Taken): the
		// ownership says whether its record was lost or the store was written by hand.
		a.r.log.Warn("a data store refused this engine's epoch; the ownership goes past the store's",
			zap.String("store", stale.Store), zap.Uint64("store_epoch", stale.Current), zap.Uint64("epoch", a.st.epoch))
		c.Send(a.r.cfg.Ownership.PID(), StoreAhead{Epoch: stale.Current})
	}
	key := m.From.String()
	if t := a.retries[key]; t != nil {
		t.Stop()
	}
	if a.retries == nil {
		a.retries = map[string]*time.Timer{}
	}
	e, self, to := c.Engine(), c.PID(), m.From
	a.retries[key] = time.AfterFunc(serveRetry, func() { e.Send(self, retryServe{to: to}) })
}

func (a *rootActor) end(err error) {
	st := a.st
	if st.ended {
		return
	}
	st.ended, st.err = true, err
	a.publish() // Err is readable once Ended is closed
	close(a.r.ended)
}

// publish puts the cascade where the handles read it.
func (a *rootActor) publish() {
	st := a.st
	v := rootView{phase: st.phase, state: st.state, up: st.up, served: st.served, epoch: st.epoch, ended: st.ended, err: st.err,
		failGen: st.failGen}
	a.r.view.Update(func(old rootView) (rootView, bool) {
		if v.failGen != old.failGen {
			v.failing = st.failing.list()
		} else {
			v.failing = old.failing
		}
		// err is set once, with ended; errors need not be comparable.
		return v, v.phase != old.phase || v.state != old.state || v.up != old.up ||
			v.served != old.served || v.epoch != old.epoch || v.ended != old.ended || v.failGen != old.failGen
	})
}

// armPhase arms the current phase's deadline, replacing the timer of the phase before.
func (a *rootActor) armPhase(c *actor.Context) {
	if a.phaseTimer != nil {
		a.phaseTimer.Stop()
		a.phaseTimer = nil
	}
	st := a.st
	if st.deadline.IsZero() || st.phase == PhaseRelaying || st.phase == PhaseDone {
		return
	}
	e, self, p := c.Engine(), c.PID(), st.phase
	a.phaseTimer = time.AfterFunc(time.Until(st.deadline), func() { e.Send(self, phaseDeadline{phase: p}) })
}

// clearFailing forgets the failing members: the members were told to stop, or the
// engine stands by, so nothing is expected of them.
func (a *rootActor) clearFailing() {
	if len(a.st.failing) > 0 {
		clear(a.st.failing)
		a.st.failGen++
	}
}

func (a *rootActor) stopRetries() {
	for key, t := range a.retries {
		t.Stop()
		delete(a.retries, key)
	}
}

func (a *rootActor) stopTimers() {
	if a.phaseTimer != nil {
		a.phaseTimer.Stop()
		a.phaseTimer = nil
	}
	a.stopRetries()
	a.stopHeld()
}

func (a *rootActor) members(withJobs bool) []*actor.PID {
	pids := append([]*actor.PID(nil), a.r.cfg.Members...)
	if withJobs && a.r.cfg.Jobs != nil {
		pids = append(pids, a.r.cfg.Jobs)
	}
	return pids
}

func (a *rootActor) fanOut(c *actor.Context, msg any, withJobs bool) {
	for _, pid := range a.members(withJobs) {
		c.Send(pid, msg)
	}
}
