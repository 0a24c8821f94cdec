package node

import (
	"context"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/lease"
	"go.uber.org/zap"
)

// This file is the engine's part of the supervision tree (internal/servicetree) and
// its teardown. Everything the engine
// runs is a service of one suture tree: the embedded broker, each NATS connection, the
// actors (the hollywood engine and every actor on it) and the backends; in
// `abi-engine run` the HTTP server and the signal handler are in the same tree
// (WithSupervisor). Load makes each part (so its errors are Load's) and hands it to the
// tree, which owns it from then on.

// The engine's services, by the name teardown knows them.
const (
	svcBroker   = "broker"   // the embedded nats-server
	svcLease    = "lease"    // the lease's connection
	svcActors   = "actors"   // the hollywood engine: root, ownership, members, jobs
	svcService  = "service"  // the connection every member uses
	svcClient   = "client"   // a client engine's connection
	svcBackends = "backends" // the serving set's backends and their health probes
	svcBudget   = "budget"   // the sessions' memory budget: its trimmer (limits.go)
)

// stopOrder is the order teardown stops the services in. suture stops a tree's
// children all at once, with no order; teardown removes them one by one: the control
// subjects first (no step-down begins behind the teardown), the actors (the members
// answer what they received while the connections are open), then the backends they
// used, the sessions' budget, the connections, and the broker under everything last.
var stopOrder = []string{svcControl, svcActors, svcBackends, svcBudget, svcService, svcClient, svcLease, svcBroker}

// Bounds of the teardown. Each service bounds its own stop; servicetree.RemoveBound,
// past them, only keeps a service that hangs from holding the engine for ever.
const (
	teardownBound = 10 * time.Second
	treeTimeout   = 30 * time.Second // the engine's own tree: how long a service may take to stop
)

// closing is what the actors' stops of one teardown pass on to those after them: they
// run one after another on the teardown's goroutine.
type closing struct {
	root     *actors.Root // the root, closed first: what it published is final
	jobsLeft bool         // a job's run had not returned when the members closed
}

// teardown is the one close of what Load started: the tree's services in stopOrder,
// then the broker's store lock. Only the ending (lifecycle.go) calls it, once.
func (e *Engine) teardown() {
	e.tree.Stop(e.stopOrder())
	e.closeBroker()
}

// stopOrder is the order the teardown stops the services in, decided once as it
// begins: a service connection that is not connected closes right after the control
// subjects. Nothing more arrives on it and no answer can leave, and a stopped member
// would wait for a round trip on it (a flush) until it reconnects: closed first, the
// members' waits end at once, as they would at the broker.
func (e *Engine) stopOrder() []string {
	e.mu.Lock()
	set := e.serving
	e.mu.Unlock()
	if set == nil || set.conn.IsConnected() {
		return stopOrder
	}
	order := []string{svcControl, svcService}
	for _, name := range stopOrder {
		if name != svcControl && name != svcService {
			order = append(order, name)
		}
	}
	return order
}

// stopActors is the actors' part of the teardown: the handles are let go (the engine
// reads as idle from now on), and the stopper stops the actors in the reverse order
// they were built (servicetree.Stopper).
func (e *Engine) stopActors() {
	e.mu.Lock()
	root := e.root
	e.serving, e.root, e.ownership = nil, nil, nil
	e.mu.Unlock()
	bound, cancel := context.WithTimeout(context.Background(), teardownBound)
	defer cancel()
	e.actorStops.Close(bound, &closing{root: root})
}

// stopMembers is the members' stop: told Stop unless the root's cascade told them
// already, then closed (closeMembers: they answer what they had received, and their
// actors are poisoned and their hosts closed). A job's run that has not returned is
// left in c for the ownership's stop.
func (e *Engine) stopMembers(ctx context.Context, set *servingSet, c *closing) {
	if !cascadeStopped(c.root) {
		set.stop()
	}
	e.counts.memberStops.Add(1)
	e.mu.Lock()
	sys := e.actorSys
	e.mu.Unlock()
	c.jobsLeft = !set.closeMembers(ctx, sys)
	e.counts.membersClose.Add(1)
}

// stopOwnershipActors is the ownership's stop: the lease given up if it is still held and
// no handover asked for its release (a failed Load, a rival), then its actors.
func (e *Engine) stopOwnershipActors(ctx context.Context, own *actors.Ownership, c *closing) {
	e.giveUpLease(ctx, own, c.root, !c.jobsLeft)
	if err := own.Stop(ctx); err != nil {
		e.log.Warn("stopping the ownership", zap.Error(err))
	}
}

// cascadeStopped reports whether the root's cascade told every member Stop: the
// handover reached its stop phase, or the lease was fenced or lost (the root relays
// Stop at once). The root is closed already: what it published is final.
func cascadeStopped(root *actors.Root) bool {
	if root == nil {
		return false
	}
	if root.Phase() >= actors.PhaseStop && root.Phase() <= actors.PhaseDone {
		return true
	}
	s := root.State()
	return s == lease.StateFenced || s == lease.StateLost
}

// giveUpLease releases a lease the engine still holds (serving or fenced), once: when
// the handover asked for the release already (its release phase began), it waits for
// that one instead of asking again.
func (e *Engine) giveUpLease(ctx context.Context, own *actors.Ownership, root *actors.Root, jobsEnded bool) {
	s := own.Status().State
	if root != nil && root.Phase() >= actors.PhaseRelease && root.Phase() <= actors.PhaseDone {
		e.counts.releases.Add(1) // the handover's
		if s == lease.StateServing || s == lease.StateFenced {
			if _, err := own.WaitFor(ctx, func(st actors.Status) bool { return st.State.Terminal() }); err != nil {
				e.log.Warn("waiting for the handover's release of the lease", zap.Error(err))
			}
		}
		return
	}
	switch {
	case s != lease.StateServing && s != lease.StateFenced:
	case !jobsEnded:
		// A released lease is taken at once, and the next holder would start the job
		// beside the run still going here. Unreleased, it lapses: the next holder takes
		// it over a lease period later, under a new epoch, which a store checking the
		// epoch the run carries (CallEpoch) refuses it under.
		e.log.Error("a job's run has not returned although cancelled: the lease is not released, so another engine takes it over only once it lapses, under a new epoch")
	default:
		e.counts.releases.Add(1)
		if _, err := own.Release(ctx); err != nil {
			e.log.Warn("releasing the lease", zap.Error(err))
		}
	}
}

// startWatch starts the goroutine that ends the engine when the root says it must: a
// lost lease, or a standby whose claim ended (timed out, or another engine of its
// rollout took the released lease). The engine owns it: stopWatchers stops it and
// waits for it.
func (e *Engine) startWatch(root *actors.Root) {
	e.watchers.Add(1)
	go func() {
		defer e.watchers.Done()
		select {
		case <-root.Ended():
		case <-e.stopWatch:
			return
		}
		if err := root.Err(); err != nil {
			e.log.Error("engine ending", zap.Error(err))
			e.beginEnd(endOnItsOwn, err)
		}
	}()
}

// stopWatchers stops the watches (of the root, of rivals) and waits for them; the
// ending calls it before the teardown.
func (e *Engine) stopWatchers() {
	e.stopWatchOnce.Do(func() { close(e.stopWatch) })
	e.watchers.Wait()
}
