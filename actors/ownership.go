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

// Messages inside the ownership tree.
type (
	tick     struct{}
	observed struct{ rec lease.Record }
	opDone   struct{ res lease.Result }
	arm      struct{ at time.Time }
	watch    struct{ on bool }
	runOp    struct{ op lease.Op }
	childUp  struct{ name string }
)

// Names of the ownership actor's children.
const (
	RenewerName   = "renewer"
	FencerName    = "fencer"
	ContenderName = "contender"
)

// errRestarted is the outcome of a call whose worker was restarted: unknown.
var errRestarted = errors.New("actors: the worker running this call was restarted")

// OwnershipConfig is what the ownership actor needs.
type OwnershipConfig struct {
	Store lease.Store
	Lease lease.Config
	// Gate is moved with the lease; every call a primary runs checks it. Optional.
	Gate *lease.Gate
	// Logger logs every lease event once. Optional.
	Logger *zap.Logger
	// OnEvent sees every lease event, on the ownership actor's goroutine (for
	// metrics; it must not block). Optional.
	OnEvent func(lease.Event)
	// Subscribers receive the role broadcasts.
	Subscribers []*actor.PID
}

// Status is a snapshot of the ownership, safe to read from any goroutine.
type Status struct {
	State       lease.State
	Revision    uint64       // ours, while serving or fenced
	Holder      lease.Holder // us while holding; the engine we watch while claiming or standing by
	LastRenewed time.Time    // when the last successful renewal was sent
	Err         error        // why the claim ended, if it did
}

// core is the ownership's durable state: the spawner owns it and every actor of the
// tree closes over it, so an actor restarted after a panic picks it up.
type core struct {
	cfg     OwnershipConfig
	machine *lease.Machine
	gate    *lease.Gate
	log     *zap.Logger
	started bool
	subs    []*actor.PID

	mu       sync.Mutex
	status   Status
	changed  chan struct{} // closed and replaced on every status change
	children map[string]*actor.PID
}

func (k *core) snapshot() (Status, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.status, k.changed
}

func (k *core) setStatus(s Status) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s == k.status {
		return
	}
	k.status = s
	close(k.changed)
	k.changed = make(chan struct{})
}

// Ownership is the handle on a spawned ownership actor.
type Ownership struct {
	engine *actor.Engine
	pid    *actor.PID
	core   *core
	stop   sync.Once
}

// SpawnOwnership validates cfg and spawns the ownership actor, which starts claiming at
// once. Wait for the claim's outcome with Claim.
func SpawnOwnership(e *actor.Engine, cfg OwnershipConfig) (*Ownership, error) {
	if cfg.Store == nil {
		return nil, errors.New("actors: ownership needs a lease store")
	}
	m, err := lease.NewMachine(cfg.Lease)
	if err != nil {
		return nil, err
	}
	k := &core{
		cfg:      cfg,
		machine:  m,
		gate:     cfg.Gate,
		log:      cfg.Logger,
		subs:     append([]*actor.PID(nil), cfg.Subscribers...),
		status:   Status{State: lease.StateIdle},
		changed:  make(chan struct{}),
		children: map[string]*actor.PID{},
	}
	if k.gate == nil {
		k.gate = lease.NewGate()
	}
	k.gate.Close() // the machine starts idle: nothing may run until it serves
	if k.log == nil {
		k.log = zap.NewNop()
	}
	k.log = k.log.Named("lease")
	pid := e.Spawn(func() actor.Receiver { return &ownershipActor{core: k} }, "ownership",
		SpawnOpts(cfg.Lease.Me.InstanceID)...)
	return &Ownership{engine: e, pid: pid, core: k}, nil
}

// PID is the ownership actor.
func (o *Ownership) PID() *actor.PID { return o.pid }

// Child is one of the ownership actor's children (RenewerName, FencerName,
// ContenderName), for fault injection.
func (o *Ownership) Child(name string) *actor.PID {
	o.core.mu.Lock()
	defer o.core.mu.Unlock()
	return o.core.children[name]
}

// Gate is the gate the ownership moves.
func (o *Ownership) Gate() *lease.Gate { return o.core.gate }

// Status is the current snapshot.
func (o *Ownership) Status() Status {
	s, _ := o.core.snapshot()
	return s
}

// WaitFor waits until ok(status) holds and returns that status, or ctx's error.
func (o *Ownership) WaitFor(ctx context.Context, ok func(Status) bool) (Status, error) {
	for {
		s, changed := o.core.snapshot()
		if ok(s) {
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return s, fmt.Errorf("actors: waiting for the lease (state %s): %w", s.State, ctx.Err())
		}
	}
}

// Claim waits for the claim's outcome: StateServing, StateStandby, or the error that
// ended it (*lease.AlreadyServingError, *lease.StandbyTimeoutError).
func (o *Ownership) Claim(ctx context.Context) (lease.State, error) {
	s, err := o.WaitFor(ctx, func(s Status) bool {
		return s.Err != nil || s.State == lease.StateServing || s.State == lease.StateStandby ||
			s.State == lease.StateFenced || s.State.Terminal()
	})
	if err != nil {
		return s.State, err
	}
	return s.State, s.Err
}

// Release gives the lease up and waits until it is released (or lost).
func (o *Ownership) Release(ctx context.Context) (Status, error) {
	o.engine.Send(o.pid, Release{})
	return o.WaitFor(ctx, func(s Status) bool { return s.State.Terminal() })
}

// Stop stops the actor tree without releasing the lease (as a crash would leave it)
// and waits until its goroutines have ended. Call Release first for a clean stop.
func (o *Ownership) Stop(ctx context.Context) error {
	var err error
	o.stop.Do(func() {
		done := o.engine.PoisonCtx(ctx, o.pid)
		<-done.Done()
		if ctx.Err() != nil {
			err = fmt.Errorf("actors: stopping the ownership: %w", ctx.Err())
		}
	})
	return err
}

// ownershipActor drives the machine.
type ownershipActor struct {
	core   *core
	worker *worker
	// last instructions sent to the children, to send only changes
	sent map[string]any
}

func (a *ownershipActor) Receive(c *actor.Context) {
	k := a.core
	switch m := c.Message().(type) {
	case actor.Started:
		a.worker = newWorker()
		a.sent = map[string]any{}
		a.spawnChildren(c)
		if !k.started {
			k.started = true
			a.apply(c, k.machine.Start(time.Now()))
		} else {
			a.sync(c)
		}
	case actor.Stopped:
		a.worker.stop()
	case tick:
		a.apply(c, k.machine.Tick(time.Now()))
	case observed:
		a.apply(c, k.machine.Observe(time.Now(), m.rec))
	case opDone:
		a.apply(c, k.machine.Done(time.Now(), m.res))
	case Release:
		a.apply(c, k.machine.Release(time.Now()))
	case Subscribe:
		k.subs = append(k.subs, m.PID)
		if r := k.machine.Role(); r.Kind != lease.RoleNone {
			c.Send(m.PID, roleMessage(r))
		}
	case childUp:
		// A restarted child lost what it was doing: a call it ran has an unknown
		// outcome, and it needs its timers again.
		if op := k.machine.InFlight(); op != nil && op.Purpose == lease.PurposeRenewal && m.name == RenewerName {
			a.apply(c, k.machine.Done(time.Now(), lease.Result{ID: op.ID, Err: errRestarted}))
		}
		delete(a.sent, m.name)
		delete(a.sent, m.name+"/watch")
		a.sync(c)
	}
}

// Restart implements Restarter: the worker's call has an unknown outcome; everything
// else is in the durable core.
func (a *ownershipActor) Restart(c *actor.Context) {
	a.worker.stop()
	a.worker = newWorker()
	a.sent = map[string]any{}
	if op := a.core.machine.InFlight(); op != nil && op.Purpose != lease.PurposeRenewal {
		a.apply(c, a.core.machine.Done(time.Now(), lease.Result{ID: op.ID, Err: errRestarted}))
		return
	}
	a.sync(c)
}

func (a *ownershipActor) spawnChildren(c *actor.Context) {
	k := a.core
	spawn := func(name string, p actor.Producer) {
		pid := c.SpawnChild(p, name, SpawnOpts("1")...)
		k.mu.Lock()
		k.children[name] = pid
		k.mu.Unlock()
	}
	spawn(RenewerName, func() actor.Receiver { return &renewer{store: k.cfg.Store} })
	spawn(FencerName, func() actor.Receiver { return &fencer{} })
	spawn(ContenderName, func() actor.Receiver { return &contender{store: k.cfg.Store} })
}

func (a *ownershipActor) child(name string) *actor.PID {
	a.core.mu.Lock()
	defer a.core.mu.Unlock()
	return a.core.children[name]
}

// apply carries out one step's Output, in its order.
func (a *ownershipActor) apply(c *actor.Context, out lease.Output) {
	k := a.core
	for _, mv := range out.Moves {
		k.log.Debug("lease move", zap.Stringer("from", mv.From), zap.Stringer("on", mv.Input), zap.Stringer("to", mv.To))
	}
	for _, ev := range out.Events {
		a.logEvent(ev)
		if k.cfg.OnEvent != nil {
			k.cfg.OnEvent(ev)
		}
	}
	if op := out.Op; op != nil {
		if op.Purpose == lease.PurposeRenewal {
			c.Send(a.child(RenewerName), runOp{op: *op})
		} else {
			a.worker.run(c.Engine(), c.PID(), k.cfg.Store, *op)
		}
	}
	switch out.Watch {
	case lease.WatchOn:
		a.send(c, ContenderName, ContenderName+"/watch", watch{on: true})
	case lease.WatchOff:
		a.send(c, ContenderName, ContenderName+"/watch", watch{on: false})
	}
	a.arm(c, out.Deadlines)
	switch out.Gate.Kind {
	case lease.GateAllow:
		k.gate.Allow(out.Gate.Until)
	case lease.GateDrain:
		// A clean handover: the calls already received are answered.
		k.gate.Drain()
	case lease.GateClose:
		k.gate.Close()
	}
	a.publish()
	if out.Role.Kind != lease.RoleNone {
		msg := roleMessage(out.Role)
		for _, pid := range k.subs {
			c.Send(pid, msg)
		}
	}
}

// roleMessage is the broadcast for a role change.
func roleMessage(r lease.Role) any {
	switch r.Kind {
	case lease.RoleServing:
		return Serving{Revision: r.Revision, Restored: r.Restored}
	case lease.RoleStandingBy:
		return StandingBy{Holder: r.Holder}
	case lease.RoleFenced:
		return Fenced{}
	case lease.RoleLost:
		return Lost{Holder: r.Holder}
	case lease.RoleReleased:
		return Released{}
	case lease.RoleClaimFailed:
		return ClaimFailed{Err: r.Err}
	}
	return nil
}

// sync sends the children their timers and the watch as the machine has them now, and
// publishes the status (after a restart, which lost what was sent).
func (a *ownershipActor) sync(c *actor.Context) {
	m := a.core.machine
	a.arm(c, m.Deadlines())
	a.send(c, ContenderName, ContenderName+"/watch", watch{on: m.Watching()})
	a.publish()
}

// arm sends each child its deadline.
func (a *ownershipActor) arm(c *actor.Context, d lease.Deadlines) {
	contend := lease.Deadlines{Takeover: d.Takeover, Standby: d.Standby, Retry: d.Retry}.Next()
	a.send(c, RenewerName, RenewerName, arm{at: d.Renew})
	a.send(c, FencerName, FencerName, arm{at: d.Fence})
	a.send(c, ContenderName, ContenderName, arm{at: contend})
}

// publish publishes the status the machine is in.
func (a *ownershipActor) publish() {
	m := a.core.machine
	s := Status{State: m.State(), Revision: m.Revision(), LastRenewed: m.LastRenewed(), Err: m.Err()}
	switch {
	case m.Revision() != 0:
		s.Holder = m.Config().Me
	case !m.Seen().Free():
		s.Holder = m.Seen().Holder
	}
	a.core.setStatus(s)
}

// send sends msg to a child unless the same instruction was its last.
func (a *ownershipActor) send(c *actor.Context, child, key string, msg any) {
	if last, ok := a.sent[key]; ok && last == msg {
		return
	}
	a.sent[key] = msg
	c.Send(a.child(child), msg)
}

func (a *ownershipActor) logEvent(ev lease.Event) {
	log := a.core.log
	fields := []zap.Field{zap.String("event", ev.Kind.String())}
	if ev.Revision != 0 {
		fields = append(fields, zap.Uint64("revision", ev.Revision))
	}
	if ev.Holder != (lease.Holder{}) {
		fields = append(fields, zap.String("holder", ev.Holder.String()))
	}
	if ev.Err != nil {
		fields = append(fields, zap.Error(ev.Err))
	}
	lc := a.core.cfg.Lease
	switch ev.Kind {
	case lease.EventRenewed:
		log.Debug("engine lease renewed", fields...)
	case lease.EventAcquired:
		log.Info("engine lease acquired: serving", append(fields, zap.String("me", lc.Me.String()))...)
	case lease.EventTookOver:
		// The silence was judged by our lease, or by the holder's longer published one.
		log.Warn(fmt.Sprintf("took over the engine lease: no renewal for at least %s", lc.Lease), fields...)
	case lease.EventStandingBy:
		log.Info("another rollout holds the engine lease: standing by", fields...)
	case lease.EventRestored:
		log.Warn("engine lease renewed again: serving", fields...)
	case lease.EventReleased, lease.EventReleaseSkipped:
		log.Info("engine lease released", fields...)
	case lease.EventRenewFailed:
		log.Warn("could not renew the engine lease", fields...)
	case lease.EventStoreError:
		log.Warn("engine lease store call failed; retrying", fields...)
	case lease.EventReleaseFailed:
		log.Warn(fmt.Sprintf("could not release the engine lease; it frees itself after %s", lc.Lease), fields...)
	case lease.EventFenced:
		log.Error(fmt.Sprintf("engine lease not renewed for %s: stopped serving", lc.FenceAfter()), fields...)
	case lease.EventLost:
		log.Error("another engine took the engine lease", fields...)
	case lease.EventEvicted:
		log.Error("the engine lease was changed by a write not ours: stopped serving", fields...)
	case lease.EventRefused:
		log.Error("another engine already serves this NATS account", fields...)
	case lease.EventStandbyTimedOut:
		log.Error(fmt.Sprintf("no handover within %s", lc.StandbyTimeout), fields...)
	case lease.EventIllegalTransition:
		log.Error("the lease state machine made a move its table does not allow (a bug)", fields...)
	}
}

// worker runs store calls in goroutines it owns and reports each outcome by message.
type worker struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWorker() *worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{ctx: ctx, cancel: cancel}
}

func (w *worker) run(e *actor.Engine, to *actor.PID, s lease.Store, op lease.Op) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		e.Send(to, opDone{res: execute(w.ctx, s, op)})
	}()
}

// stop cancels the calls in flight and waits for their goroutines; a cancelled store
// call returns at once.
func (w *worker) stop() {
	w.cancel()
	w.wg.Wait()
}

func execute(ctx context.Context, s lease.Store, op lease.Op) lease.Result {
	ctx, cancel := context.WithTimeout(ctx, op.Timeout)
	defer cancel()
	res := lease.Result{ID: op.ID}
	switch op.Kind {
	case lease.OpRead:
		res.Record, res.Err = s.Read(ctx)
	case lease.OpCreate:
		res.Rev, res.Err = s.Create(ctx, op.Holder)
	case lease.OpUpdate:
		res.Rev, res.Err = s.Update(ctx, op.Holder, op.Revision)
	case lease.OpDelete:
		res.Err = s.Delete(ctx, op.Revision)
	case lease.OpPublish:
		res.Err = s.Publish(ctx, op.Period)
	default:
		res.Err = fmt.Errorf("actors: unknown store call %v", op.Kind)
	}
	return res
}

// timer sends tick to the parent at a time; re-arming replaces it.
type timer struct{ t *time.Timer }

func (t *timer) arm(c *actor.Context, at time.Time) {
	t.stop()
	if at.IsZero() {
		return
	}
	e, parent := c.Engine(), c.Parent()
	t.t = time.AfterFunc(time.Until(at), func() { e.Send(parent, tick{}) })
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
}

// renewer owns the renewal timer and runs the renewal calls.
type renewer struct {
	store  lease.Store
	timer  timer
	worker *worker
}

func (r *renewer) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		r.worker = newWorker()
	case actor.Stopped:
		r.timer.stop()
		r.worker.stop()
	case arm:
		r.timer.arm(c, m.at)
	case runOp:
		r.worker.run(c.Engine(), c.Parent(), r.store, m.op)
	}
}

// Restart implements Restarter.
func (r *renewer) Restart(c *actor.Context) {
	r.timer.stop()
	r.worker.stop()
	r.worker = newWorker()
	c.Send(c.Parent(), childUp{name: RenewerName})
}

// fencer owns the fence timer: it fires lease/2 after the last successful renewal
// was sent, and the machine fences on that tick.
type fencer struct{ timer timer }

func (f *fencer) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Stopped:
		f.timer.stop()
	case arm:
		f.timer.arm(c, m.at)
	}
}

// Restart implements Restarter.
func (f *fencer) Restart(c *actor.Context) {
	f.timer.stop()
	c.Send(c.Parent(), childUp{name: FencerName})
}

// watchRetry is how long the contender waits before watching again after a failure.
const watchRetry = 250 * time.Millisecond

// contender watches the lease (while claiming or standing by, and while holding, to see
// any write not ours at once) and owns the takeover and standby timers.
type contender struct {
	store  lease.Store
	timer  timer
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (t *contender) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Stopped:
		t.timer.stop()
		t.stopWatch()
	case arm:
		t.timer.arm(c, m.at)
	case watch:
		if m.on {
			t.startWatch(c)
		} else {
			t.stopWatch()
		}
	}
}

// Restart implements Restarter.
func (t *contender) Restart(c *actor.Context) {
	t.timer.stop()
	t.stopWatch()
	c.Send(c.Parent(), childUp{name: ContenderName})
}

func (t *contender) startWatch(c *actor.Context) {
	if t.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	e, parent, s := c.Engine(), c.Parent(), t.store
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for ctx.Err() == nil {
			if w, err := s.Watch(ctx); err == nil {
				for rec := range w.Updates() {
					e.Send(parent, observed{rec: rec})
				}
				w.Stop()
			}
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}()
}

func (t *contender) stopWatch() {
	if t.cancel == nil {
		return
	}
	t.cancel()
	t.wg.Wait()
	t.cancel = nil
}
