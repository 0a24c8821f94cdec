package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
)

// Handover phases, as reported to RootConfig.OnPhase with their durations.
const (
	PhaseJobs     = "jobs"     // jobs stop; runs in progress finish
	PhaseRelease  = "release"  // the lease is released
	PhaseDrain    = "drain"    // shared subscriptions end; received calls and sessions finish
	PhaseSessions = "sessions" // the second wait for sessions
	PhaseStop     = "stop"     // everything left is closed
)

// stopBound bounds the wait for members to confirm Stop: a member that never answers
// must not hold the process forever.
const stopBound = 5 * time.Second

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
	// Sessions is the second wait for sessions over every host (a call answered during
	// the first wait can park an overflowing reply on a host already done). Optional.
	Sessions func(ctx context.Context) error
	// OnPhase sees each handover phase's duration. Optional.
	OnPhase func(phase string, d time.Duration)
	Logger  *zap.Logger
}

// Root is the handle on the engine's root actor. It turns the ownership's role
// broadcasts into role commands for every member and runs the handover cascade.
type Root struct {
	cfg RootConfig
	pid *actor.PID
	log *zap.Logger

	// durable state of the cascade, kept here so a restarted root carries on
	mu         sync.Mutex
	handing    bool
	phase      string
	phaseStart time.Time
	deadline   time.Time
	waiting    map[string]bool // members (PID strings) a phase still waits for
	ended      chan struct{}   // closed when the engine must end: handover done, lost, timed out
	endErr     error
	sessCancel context.CancelFunc
	sessWG     sync.WaitGroup

	// serving confirmations of the current serving period
	upWaiting map[string]bool
	up        chan struct{} // closed once every member and the jobs host accept
	// state is the role the members carry out: serving only once every member and the
	// jobs host have confirmed the last Serve; until then the state before it.
	state lease.State
}

type (
	rootTick     struct{ phase string }
	sessionsDone struct{ err error }
	retryServe   struct{ to *actor.PID }
)

// serveRetry is the pause before a member that failed to serve is told Serve again.
const serveRetry = 500 * time.Millisecond

// SpawnRoot spawns the root actor; it subscribes itself to the ownership.
func SpawnRoot(e *actor.Engine, cfg RootConfig) (*Root, error) {
	if cfg.Ownership == nil {
		return nil, errors.New("actors: the root actor needs the ownership")
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	r := &Root{cfg: cfg, log: log.Named("root"), ended: make(chan struct{}), up: make(chan struct{}), state: lease.StateIdle}
	r.pid = e.Spawn(func() actor.Receiver { return &rootActor{r: r} }, "root", SpawnOpts("engine")...)
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
func (r *Root) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endErr
}

// Phase is the handover phase in progress ("" before a handover, "done" after).
func (r *Root) Phase() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase
}

// Handover starts the cascade and waits until it is done or ctx ends. Calling it
// again waits for the same cascade.
func (r *Root) Handover(ctx context.Context, e *actor.Engine) error {
	e.Send(r.pid, Handover{})
	select {
	case <-r.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: handover in phase %q: %w", r.Phase(), ctx.Err())
	}
}

// WaitServing waits until every member and the jobs host have confirmed the last
// Serve: the engine takes calls.
func (r *Root) WaitServing(ctx context.Context) error {
	r.mu.Lock()
	up := r.up
	r.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-r.ended:
		if err := r.Err(); err != nil {
			return err
		}
		return errors.New("actors: the engine ended before it served")
	case <-ctx.Done():
		return fmt.Errorf("actors: waiting for the services to serve: %w", ctx.Err())
	}
}

// State is the role the engine's members carry out: StateServing only once every member
// and the jobs host have confirmed the last Serve (the services answer), and until then
// the state before it (idle, standby, fenced). Leaving serving shows first in the
// ownership's status, which the root hears of after it.
func (r *Root) State() lease.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

func (r *Root) setState(s lease.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
}

// Stop waits for the second session wait, if one runs.
func (r *Root) Stop() {
	r.mu.Lock()
	cancel := r.sessCancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.sessWG.Wait()
}

type rootActor struct{ r *Root }

func (a *rootActor) Receive(c *actor.Context) {
	r := a.r
	switch m := c.Message().(type) {
	case actor.Started:
		c.Send(r.cfg.Ownership.PID(), Subscribe{PID: c.PID()})
	case Serving:
		if !r.handingOver() {
			r.log.Info("serving", zap.Uint64("revision", m.Revision), zap.Bool("restored", m.Restored))
			a.expectUp()
			a.fanOut(c, Serve{}, true)
		}
	case StandingBy:
		r.setState(lease.StateStandby)
	case Fenced:
		a.notUp(lease.StateFenced)
		a.fanOut(c, Stop{}, true)
	case Lost:
		a.notUp(lease.StateLost)
		a.fanOut(c, Stop{}, true)
		if !r.handingOver() {
			a.end(&lease.LostError{Holder: m.Holder})
		}
	case ClaimFailed:
		// The root exists once the claim stood by (or served): a claim that ends now is
		// a standby's, timed out or beaten to a released lease by an engine of its own
		// rollout. Either way it will never serve: end, as a refused engine does.
		a.end(m.Err)
	case Handover:
		a.beginHandover(c)
	case Accepting:
		if m.On {
			a.accepted(m.From)
		}
	case ServeFailed:
		// Retry after a pause; a broker that is away comes back, and a fence or a
		// handover meanwhile makes the retry moot.
		r.log.Warn("a member could not serve; retrying", zap.Stringer("member", m.From), zap.Error(m.Err))
		e, self, to := c.Engine(), c.PID(), m.From
		time.AfterFunc(serveRetry, func() { e.Send(self, retryServe{to: to}) })
	case retryServe:
		if st := r.cfg.Ownership.Status().State; st == lease.StateServing && !r.handingOver() {
			c.Send(m.to, Serve{})
		}
	case Drained, Down:
		a.answered(c, m)
	case Released:
		a.notUp(lease.StateReleased)
		if r.Phase() == PhaseRelease {
			a.drain(c)
		}
	case rootTick:
		if r.Phase() == m.phase {
			r.log.Warn("handover phase deadline passed", zap.String("phase", m.phase))
			a.next(c)
		}
	case sessionsDone:
		if r.Phase() == PhaseSessions {
			if m.err != nil {
				r.log.Warn("sessions still open at the drain deadline", zap.Error(m.err))
			}
			a.stopAll(c)
		}
	}
}

// Restart implements Restarter: the cascade's state is in Root; a phase waiting on a
// message already received is moved on by its deadline.
func (a *rootActor) Restart(c *actor.Context) {
	c.Send(a.r.cfg.Ownership.PID(), Subscribe{PID: c.PID()})
}

func (r *Root) handingOver() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handing
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

// expectUp starts a serving period: WaitServing waits for every member to accept.
func (a *rootActor) expectUp() {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.up:
		r.up = make(chan struct{})
	default:
	}
	r.upWaiting = map[string]bool{}
	for _, pid := range a.members(true) {
		r.upWaiting[pid.String()] = true
	}
	if len(r.upWaiting) == 0 {
		close(r.up)
		r.state = lease.StateServing
	}
}

// notUp ends a serving period: the members were told to stop, so the engine no longer
// serves, and confirmations of the period's Serve no longer count.
func (a *rootActor) notUp(s lease.State) {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
	r.upWaiting = nil
	select {
	case <-r.up:
		r.up = make(chan struct{})
	default:
	}
}

func (a *rootActor) accepted(from *actor.PID) {
	r := a.r
	if from == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.upWaiting == nil || !r.upWaiting[from.String()] {
		return
	}
	delete(r.upWaiting, from.String())
	if len(r.upWaiting) == 0 {
		close(r.up)
		r.state = lease.StateServing
	}
}

// enter starts a phase that waits for an answer from each of pids, bounded by deadline.
func (a *rootActor) enter(c *actor.Context, phase string, pids []*actor.PID, deadline time.Time) {
	r := a.r
	r.mu.Lock()
	if r.phase != "" && r.phase != "done" && r.cfg.OnPhase != nil {
		r.cfg.OnPhase(r.phase, time.Since(r.phaseStart))
	}
	r.phase, r.phaseStart, r.deadline = phase, time.Now(), deadline
	r.waiting = map[string]bool{}
	for _, pid := range pids {
		r.waiting[pid.String()] = true
	}
	r.mu.Unlock()
	r.log.Info("handover", zap.String("phase", phase), zap.Int("waiting_for", len(pids)))
	if !deadline.IsZero() {
		e, self := c.Engine(), c.PID()
		time.AfterFunc(time.Until(deadline), func() { e.Send(self, rootTick{phase: phase}) })
	}
}

func (a *rootActor) beginHandover(c *actor.Context) {
	r := a.r
	r.mu.Lock()
	if r.handing {
		r.mu.Unlock()
		return
	}
	r.handing = true
	r.mu.Unlock()
	if r.cfg.Jobs == nil {
		a.release(c)
		return
	}
	deadline := time.Now().Add(r.cfg.Drain)
	a.enter(c, PhaseJobs, []*actor.PID{r.cfg.Jobs}, deadline)
	c.Send(r.cfg.Jobs, StopAccepting{Deadline: deadline})
}

func (a *rootActor) release(c *actor.Context) {
	r := a.r
	lc := r.cfg.Ownership.core.cfg.Lease
	a.enter(c, PhaseRelease, nil, time.Now().Add(lc.RenewEvery()*2))
	if r.cfg.Ownership.Status().State.Terminal() {
		a.drain(c)
		return
	}
	c.Send(r.cfg.Ownership.PID(), Release{})
}

func (a *rootActor) drain(c *actor.Context) {
	r := a.r
	members := a.members(false)
	deadline := time.Now().Add(r.cfg.Drain)
	a.enter(c, PhaseDrain, members, deadline)
	if len(members) == 0 || r.cfg.Drain <= 0 {
		a.next(c)
		return
	}
	a.fanOut(c, StopAccepting{Deadline: deadline}, false)
}

func (a *rootActor) sessions(c *actor.Context) {
	r := a.r
	r.mu.Lock()
	deadline := r.deadline
	r.mu.Unlock()
	a.enter(c, PhaseSessions, nil, deadline)
	if r.cfg.Sessions == nil || !time.Now().Before(deadline) {
		a.stopAll(c)
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	r.mu.Lock()
	r.sessCancel = cancel
	r.mu.Unlock()
	e, self := c.Engine(), c.PID()
	r.sessWG.Add(1)
	go func() {
		defer r.sessWG.Done()
		defer cancel()
		e.Send(self, sessionsDone{err: r.cfg.Sessions(ctx)})
	}()
}

func (a *rootActor) stopAll(c *actor.Context) {
	pids := a.members(true)
	a.enter(c, PhaseStop, pids, time.Now().Add(stopBound))
	if len(pids) == 0 {
		a.next(c)
		return
	}
	a.fanOut(c, Stop{}, true)
}

// next moves the cascade on from the current phase.
func (a *rootActor) next(c *actor.Context) {
	switch a.r.Phase() {
	case PhaseJobs:
		a.release(c)
	case PhaseRelease:
		a.drain(c)
	case PhaseDrain:
		a.sessions(c)
	case PhaseSessions:
		a.stopAll(c)
	case PhaseStop:
		a.enter(c, "done", nil, time.Time{})
		a.end(nil)
	}
}

// answered counts a member's answer for the phase that waits for it.
func (a *rootActor) answered(c *actor.Context, msg any) {
	r := a.r
	var from *actor.PID
	phase := r.Phase()
	switch m := msg.(type) {
	case Drained:
		if phase != PhaseJobs && phase != PhaseDrain {
			return
		}
		from = m.From
	case Down:
		if phase != PhaseStop {
			return
		}
		from = m.From
	default:
		return
	}
	if from == nil {
		return
	}
	r.mu.Lock()
	delete(r.waiting, from.String())
	left := len(r.waiting)
	r.mu.Unlock()
	if left == 0 {
		a.next(c)
	}
}

func (a *rootActor) end(err error) {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.ended:
		return
	default:
	}
	r.endErr = err
	close(r.ended)
}
