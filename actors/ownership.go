package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/notify"
	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
)

// Messages inside the ownership tree; the role messages it broadcasts and takes are in
// messages.go.
type (
	tick     struct{}                   // a child's timer fired: the machine checks its deadlines
	observed struct{ rec lease.Record } // the contender's watch delivered a record
	// the contender's epoch watch delivered a record
	observedEpoch struct{ rec lease.EpochRecord }
	opDone        struct{ res lease.Result } // a store call ended (a cancelled one: unknown)
	arm           struct{ at time.Time }     // arm the child's timer at at; zero: disarm it
	watch         struct{ on bool }          // the contender's watch on or off
	watchEpoch    struct{ on bool }          // the contender's watch of the epoch record on or off
	runOp         struct{ op lease.Op }      // the renewer runs a call that keeps the lease
	childUp       struct{ name string }      // a child restarted after a panic: instruct it again
)

// Names of the ownership actor's children.
const (
	RenewerName   = "renewer"
	FencerName    = "fencer"
	ContenderName = "contender"
)

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
	// Clock is the time the lease machine and its timers run on; nil is the real one.
	Clock Clock
	// Failpoints hosts drop-renewal-reply (package failpoint); nil: none.
	Failpoints *failpoint.Set
	// Auto is an engine of role auto: a refusal makes it a client, a role change the
	// engine logs itself (naming the holder), so the refusal is no warning here.
	Auto bool
}

// Status is a snapshot of the ownership, safe to read from any goroutine.
type Status struct {
	State       lease.State
	Revision    uint64       // ours, while serving or fenced
	Epoch       uint64       // the epoch we hold while the lease is ours (serve under, while serving)
	Holder      lease.Holder // us while holding; the engine we watch while claiming or standing by
	LastRenewed time.Time    // when the last successful renewal was sent
	Err         error        // why the claim ended, if it did
	// Since is when the ownership entered State (a standby's wait, for step-down's
	// choice of the longest-waiting one).
	Since time.Time
	// HandingTo is whom a release would hand the lease to (step-down); zero: nobody.
	HandingTo lease.Target
	// Tampered is a *lease.StoreAheadError while the lease is ours and a data store
	// was found ahead of its intact epoch record (lease.Machine.Tampered).
	Tampered error
}

// core is the ownership's durable state: the spawner owns it and every actor of the
// tree closes over it, so an actor restarted after a panic picks it up. Its fields
// change only on the ownership actor's goroutine; handles read status and children,
// which are published.
type core struct {
	cfg     OwnershipConfig
	machine *lease.Machine
	gate    *lease.Gate
	clock   Clock
	log     *zap.Logger
	started bool
	subs    []*actor.PID
	// drainWaiters sent MarkDrained and wait for DrainMarked.
	drainWaiters []*actor.PID

	status   *notify.Value[Status]
	children atomic.Pointer[children]
	tasks    *Group // every goroutine of the tree (store calls, the watches); never shut, Stop waits for it
}

// children are the ownership actor's children, published once they are spawned.
type children struct{ renewer, fencer, contender *actor.PID }

func (ch *children) get(name string) *actor.PID {
	if ch == nil {
		return nil
	}
	switch name {
	case RenewerName:
		return ch.renewer
	case FencerName:
		return ch.fencer
	case ContenderName:
		return ch.contender
	}
	return nil
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
		cfg:     cfg,
		machine: m,
		gate:    cfg.Gate,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		subs:    append([]*actor.PID(nil), cfg.Subscribers...),
		status:  notify.New(Status{State: lease.StateIdle}),
		tasks:   NewGroup(),
	}
	if k.gate == nil {
		k.gate = lease.NewGate()
	}
	if k.clock == nil {
		k.clock = clock.Real()
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
func (o *Ownership) Child(name string) *actor.PID { return o.core.children.Load().get(name) }

// Config is the lease configuration the ownership runs with.
func (o *Ownership) Config() lease.Config { return o.core.cfg.Lease }

// Gate is the gate the ownership moves.
func (o *Ownership) Gate() *lease.Gate { return o.core.gate }

// Status is the current snapshot.
func (o *Ownership) Status() Status { return o.core.status.Load() }

// WaitFor waits until ok(status) holds and returns that status, or ctx's error.
func (o *Ownership) WaitFor(ctx context.Context, ok func(Status) bool) (Status, error) {
	s, err := o.core.status.Wait(ctx, ok)
	if err != nil {
		return s, fmt.Errorf("actors: waiting for the lease (state %s): %w", s.State, err)
	}
	return s, nil
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
// and waits until its goroutines have ended (the store calls in flight and the watch,
// cancelled as the actors stop). Call Release first for a clean stop.
func (o *Ownership) Stop(ctx context.Context) error {
	var err error
	o.stop.Do(func() {
		<-o.engine.PoisonCtx(ctx, o.pid).Done()
		if ctx.Err() == nil {
			err = o.core.tasks.Wait(ctx)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("actors: stopping the ownership: %w", ctx.Err())
		}
	})
	return err
}

// ownershipActor is the machine's driver: it feeds the machine its inputs (timer ticks,
// watch records, call outcomes, Release) and carries out each Output. It runs the
// claim and release calls itself; the renewer runs the calls that keep the lease.
//
// State: in core (durable, changed only here): the machine, the subscribers, the gate,
// the published status and children; its own fields: the worker, the children's PIDs
// and the timer each child was last told. Goroutines: one per claim or release call,
// cancelled when it stops or restarts, waited for by Ownership.Stop; each reports
// opDone. Messages: it takes tick (from the renewer's, fencer's and contender's
// timers), observed and observedEpoch (contender), opDone, childUp, Release, Subscribe,
// Unsubscribe and MarkDrained; it sends runOp to the renewer, arm to each child, watch
// and watchEpoch to the contender, the role broadcasts (Serving, StandingBy, Fenced,
// Lost, Released, ClaimFailed), EpochChanged and StatusChanged to its subscribers, and
// DrainMarked to whoever sent MarkDrained, once its mark is over.
type ownershipActor struct {
	core     *core
	worker   *worker
	children *children
	armed    map[string]time.Time // the timer each child was last told, to send only changes
}

func (a *ownershipActor) Receive(c *actor.Context) {
	k := a.core
	switch m := c.Message().(type) {
	case actor.Started:
		a.worker = newWorker(k.tasks)
		a.armed = map[string]time.Time{}
		a.spawnChildren(c)
		if !k.started {
			k.started = true
			a.apply(c, k.machine.Start(k.clock.Now()))
		} else {
			a.resync(c)
		}
	case actor.Stopped:
		a.worker.stop()
	case tick:
		a.apply(c, k.machine.Tick(k.clock.Now()))
	case observed:
		a.apply(c, k.machine.Observe(k.clock.Now(), m.rec))
	case observedEpoch:
		a.apply(c, k.machine.ObserveEpoch(k.clock.Now(), m.rec))
	case opDone:
		a.apply(c, k.machine.Done(k.clock.Now(), m.res))
	case Release:
		a.apply(c, k.machine.Release(k.clock.Now()))
	case HandTo:
		k.machine.HandTo(m.Target)
		a.publish(c)
	case MarkDrained:
		if from := c.Sender(); from != nil {
			k.drainWaiters = append(k.drainWaiters, from)
		}
		a.apply(c, k.machine.MarkDrained(k.clock.Now()))
	case StoreAhead:
		a.apply(c, k.machine.StoreAhead(k.clock.Now(), m.Epoch))
	case Subscribe:
		// A subscriber that subscribes again (a root restarted after a panic does, to
		// learn the current role) is told the role, not added twice: every broadcast
		// would otherwise reach it once per restart.
		if !slices.ContainsFunc(k.subs, m.PID.Equals) {
			k.subs = append(k.subs, m.PID)
		}
		c.Send(m.PID, StatusChanged{Status: k.status.Load()})
		if r := k.machine.Role(); r.Kind != lease.RoleNone {
			c.Send(m.PID, roleMessage(r))
		}
	case Unsubscribe:
		k.subs = slices.DeleteFunc(k.subs, m.PID.Equals)
	case childUp:
		// A restarted child lost its timer (and the contender its watch); a call the
		// renewer ran reports its own end, cancelled: an unknown outcome.
		delete(a.armed, m.name)
		a.arm(c, k.machine.Deadlines())
		if m.name == ContenderName {
			c.Send(a.children.contender, watch{on: k.machine.Watching()})
			c.Send(a.children.contender, watchEpoch{on: k.machine.WatchingEpoch()})
		}
	}
}

// Restart implements Restarter: the calls in flight on the worker are cancelled (each
// reports its end, an unknown outcome); everything else is in the durable core, and
// the children are told again what they should be doing.
func (a *ownershipActor) Restart(c *actor.Context) {
	a.worker.stop()
	a.worker = newWorker(a.core.tasks)
	a.resync(c)
}

func (a *ownershipActor) spawnChildren(c *actor.Context) {
	k := a.core
	spawn := func(name string, p actor.Producer) *actor.PID {
		return c.SpawnChild(p, name, SpawnOpts("1")...)
	}
	a.children = &children{
		renewer: spawn(RenewerName, func() actor.Receiver {
			return &renewer{store: renewalStore(k.cfg.Store, k.cfg.Failpoints), tasks: k.tasks}
		}),
		fencer:    spawn(FencerName, func() actor.Receiver { return &fencer{} }),
		contender: spawn(ContenderName, func() actor.Receiver { return &contender{store: k.cfg.Store, tasks: k.tasks} }),
	}
	k.children.Store(a.children)
}

// resync sends every child its timer, and the contender its watch, as the machine
// has them now.
func (a *ownershipActor) resync(c *actor.Context) {
	a.armed = map[string]time.Time{}
	a.arm(c, a.core.machine.Deadlines())
	c.Send(a.children.contender, watch{on: a.core.machine.Watching()})
	c.Send(a.children.contender, watchEpoch{on: a.core.machine.WatchingEpoch()})
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
	if out.Op != nil {
		op := *out.Op
		op.Timeout = clock.RealDuration(k.clock, op.Timeout)
		if op.Purpose == lease.PurposeRenewal {
			c.Send(a.children.renewer, runOp{op: op})
		} else {
			a.worker.run(c.Engine(), c.PID(), k.cfg.Store, op)
		}
	}
	switch out.Watch {
	case lease.WatchOn:
		c.Send(a.children.contender, watch{on: true})
	case lease.WatchOff:
		c.Send(a.children.contender, watch{on: false})
	}
	switch out.EpochWatch {
	case lease.WatchOn:
		c.Send(a.children.contender, watchEpoch{on: true})
	case lease.WatchOff:
		c.Send(a.children.contender, watchEpoch{on: false})
	}
	a.arm(c, out.Deadlines)
	switch out.Gate.Kind {
	case lease.GateAllow:
		k.gate.Allow(k.clock.Real(out.Gate.Until))
	case lease.GateDrain:
		// A clean handover: the calls already received are answered.
		k.gate.Drain()
	case lease.GateClose:
		k.gate.Close()
	}
	a.publish(c)
	if out.Role.Kind != lease.RoleNone {
		msg := roleMessage(out.Role)
		for _, pid := range k.subs {
			c.Send(pid, msg)
		}
	}
	if out.EpochChanged != 0 {
		for _, pid := range k.subs {
			c.Send(pid, EpochChanged{Epoch: out.EpochChanged})
		}
	}
	if len(k.drainWaiters) > 0 && !k.machine.MarkingDrained() {
		for _, pid := range k.drainWaiters {
			c.Send(pid, DrainMarked{})
		}
		k.drainWaiters = nil
	}
}

// arm sends each child its deadline, when it is not the one it has.
func (a *ownershipActor) arm(c *actor.Context, d lease.Deadlines) {
	contend := lease.Deadlines{Takeover: d.Takeover, Standby: d.Standby, Retry: d.Retry, Epoch: d.Epoch}.Next()
	for _, t := range []struct {
		name string
		pid  *actor.PID
		at   time.Time
	}{
		{RenewerName, a.children.renewer, d.Renew},
		{FencerName, a.children.fencer, d.Fence},
		{ContenderName, a.children.contender, contend},
	} {
		if last, ok := a.armed[t.name]; ok && last.Equal(t.at) {
			continue
		}
		a.armed[t.name] = t.at
		c.Send(t.pid, arm{at: a.core.clock.Real(t.at)}) // the timers run on the real clock
	}
}

// publish publishes the status the machine is in, and tells the subscribers when it
// changed (StatusChanged).
func (a *ownershipActor) publish(c *actor.Context) {
	m := a.core.machine
	s := Status{State: m.State(), Revision: m.Revision(), Epoch: m.Epoch(), LastRenewed: a.core.clock.Real(m.LastRenewed()), Err: m.Err(),
		HandingTo: m.HandingTo(), Tampered: m.Tampered()}
	switch {
	case m.Revision() != 0:
		s.Holder = m.Config().Me
	case !m.Seen().Free():
		s.Holder = m.Seen().Holder
	}
	now := time.Now()
	changed := false
	a.core.status.Update(func(old Status) (Status, bool) {
		s.Since = old.Since
		if s.State != old.State || old.Since.IsZero() {
			s.Since = now
		}
		changed = s != old
		return s, changed
	})
	if changed {
		for _, pid := range a.core.subs {
			c.Send(pid, StatusChanged{Status: s})
		}
	}
}

// roleMessage is the broadcast for a role change.
func roleMessage(r lease.Role) any {
	switch r.Kind {
	case lease.RoleServing:
		return Serving{Revision: r.Revision, Restored: r.Restored, Epoch: r.Epoch, Shared: r.Shared}
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

func (a *ownershipActor) logEvent(ev lease.Event) {
	if a.logEpochEvent(ev) {
		return
	}
	log := a.core.log
	lc := a.core.cfg.Lease
	// Every line names the holder the event leaves (this engine, or the other one it
	// is about), the revision and the epoch; the engine it took over from, when any.
	fields := []zap.Field{zap.String("event", ev.Kind.String()), zap.Uint64("revision", ev.Revision),
		zap.Uint64("epoch", a.core.machine.Epoch())}
	switch ev.Kind {
	case lease.EventStandingBy, lease.EventRefused, lease.EventLost, lease.EventEvicted, lease.EventStandbyTimedOut:
		switch {
		case ev.Holder != (lease.Holder{}):
			fields = append(fields, zap.String("holder", ev.Holder.String()))
		case ev.Kind == lease.EventLost:
			// Another engine created the lease before this one's create: the process's
			// exit reads the lease and names it.
			fields = append(fields, zap.String("holder", "unknown: another engine created the lease first"))
		}
	default:
		fields = append(fields, zap.String("holder", lc.Me.String()))
		if ev.Holder != (lease.Holder{}) {
			fields = append(fields, zap.String("previous_holder", ev.Holder.String()))
		}
	}
	if ev.Err != nil {
		fields = append(fields, zap.Error(ev.Err))
	}
	switch ev.Kind {
	case lease.EventRenewed:
		log.Debug("engine lease renewed", fields...)
	case lease.EventAcquired:
		log.Info("engine lease acquired: serving", fields...)
	case lease.EventTookOver:
		// The silence was judged by our lease, or by the holder's longer published one.
		log.Warn(fmt.Sprintf("took over the engine lease: no renewal for at least %s", lc.Lease), fields...)
	case lease.EventStandingBy:
		if lc.Hot && ev.Holder.RolloutID == lc.Me.RolloutID {
			// A hot standby waits beside an engine of its own rollout (a replica).
			log.Info("an engine of this rollout holds the engine lease: standing by (hot standby)", fields...)
			return
		}
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
		// An eviction or a takeover is an operator's act or the lease doing its work:
		// the engine stops as it should, and the holder is named.
		log.Warn("another engine took the engine lease", fields...)
	case lease.EventEvicted:
		log.Warn("the engine lease was changed by a write not ours: stopped serving", fields...)
	case lease.EventRefused:
		if a.core.cfg.Auto {
			log.Debug("another engine already serves this NATS account", fields...)
			return
		}
		// The guarantee at work: the second engine is refused and exits 3.
		log.Warn("another engine already serves this NATS account", fields...)
	case lease.EventStandbyTimedOut:
		log.Error(fmt.Sprintf("no handover within %s", lc.StandbyTimeout), fields...)
	case lease.EventHandedOff:
		t, _ := ev.Holder.Handoff()
		log.Info("engine lease handed over: released to "+t.String(), fields...)
	case lease.EventHandedOver:
		log.Info("the engine lease was released to this engine: taking it at once", fields...)
	case lease.EventIllegalTransition:
		log.Error("the lease state machine made a move its table does not allow (a bug)", fields...)
	}
}

// logEpochEvent logs an epoch event, one line each (a bump names the old and the new
// epoch, the holder, and whether it was deferred); it reports whether ev was one.
func (a *ownershipActor) logEpochEvent(ev lease.Event) bool {
	log, lc := a.core.log, a.core.cfg.Lease
	fields := []zap.Field{zap.String("event", ev.Kind.String()), zap.Uint64("epoch", ev.Epoch)}
	if ev.Err != nil {
		fields = append(fields, zap.Error(ev.Err))
	}
	switch ev.Kind {
	case lease.EventEpochBumped:
		log.Info(fmt.Sprintf("engine epoch %d -> %d", ev.PrevEpoch, ev.Epoch), append(fields,
			zap.Uint64("old_epoch", ev.PrevEpoch), zap.String("holder", lc.Me.InstanceID),
			zap.String("previous_holder", ev.Holder.InstanceID), zap.Bool("deferred", ev.Deferred))...)
	case lease.EventEpochDeferred:
		log.Info(fmt.Sprintf("serving under epoch %d while %s drains it: the next epoch follows its drain, or %s",
			ev.Epoch, ev.Holder.InstanceID, lc.Drain), append(fields, zap.String("draining", ev.Holder.InstanceID))...)
	case lease.EventEpochFailed:
		log.Warn("could not settle the engine epoch; trying again", fields...)
	case lease.EventEpochMarked:
		log.Info("engine epoch marked "+ev.EpochState.String(), fields...)
	case lease.EventEpochMarkSkipped:
		log.Info("engine epoch not marked "+ev.EpochState.String(), fields...)
	case lease.EventStoreAhead:
		fields = []zap.Field{zap.String("event", ev.Kind.String()), zap.Uint64("store_epoch", ev.Epoch),
			zap.Uint64("epoch", ev.PrevEpoch), zap.Bool("record_intact", ev.Intact)}
		if ev.Intact {
			log.Error(fmt.Sprintf("a data store holds epoch %d, not below this engine's %d, although the lease's epoch record is intact: "+
				"something other than an engine wrote the store's epoch; the engine's epoch goes past it and supersedes every epoch below it", ev.Epoch, ev.PrevEpoch), fields...)
		} else {
			log.Warn(fmt.Sprintf("a data store holds epoch %d, not below this engine's %d: the lease's epoch record was lost "+
				"(ABI_ENGINE recreated, or its epoch key deleted); the engine's epoch goes past it", ev.Epoch, ev.PrevEpoch), fields...)
		}
	default:
		return false
	}
	return true
}
