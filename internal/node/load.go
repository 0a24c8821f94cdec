package node

import (
	"context"
	"fmt"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/rivals"
	"github.com/abi-engine/engine/internal/servicetree"
	"github.com/abi-engine/engine/internal/storeproof"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// This file is how Load starts the engine in its role, after connect (broker.go): the
// claim, the serving set (serve.go) and its root and control, or a client. Each step
// hands what it made to the next as a value, and what it started to the tree (tree.go)
// or the actors' stopper as it is made, which own it from then on.

// loadClient makes every service a NATS client of the serving engine, on nc (the
// client connection): no lease, no backend, no file, no subscription.
func (e *Engine) loadClient(nc *nats.Conn) error {
	tr, err := client.NewTransport(nc, client.WithCounters(e.metrics.ClientCounters),
		client.WithDefaultTimeout(e.cfg.NATS.ClientTimeout()))
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	e.mu.Lock()
	e.role = config.RoleClient
	e.kv = client.NewKeyValue(tr)
	e.objects = client.NewObjectStorage(tr)
	e.mu.Unlock()
	e.log.Info("client engine loaded: every service is a NATS client of the serving engine")
	return nil
}

// claimed is what the claim made, which the serving set is built on.
type claimed struct {
	state  lease.State           // serving, or standing by
	store  *jetstreamstore.Store // the lease bucket: the store ids are published there (storeproof)
	rivals *rivals.Finder        // the check before the claim, whose watch runs while serving
}

// claim checks for rivals on nc (the lease's own connection) and in the lease bucket
// (store), starts the actors with the ownership, and takes (or waits for) the lease.
func (e *Engine) claim(ctx context.Context, nc *nats.Conn, store *jetstreamstore.Store) (claimed, error) {
	// Before the claim: an engine refused here has written nothing.
	// The holders this check reads are known to the watch of rivals (watchRivals).
	finder := rivals.NewFinder(nc, store, e.InstanceID(), e.cfg.NATS.JetStream.Domain, e.log)
	rival, err := finder.Find(ctx)
	if err != nil {
		return claimed{}, err
	}
	if rival != nil {
		return claimed{}, e.opts.Errors.Rival(*rival)
	}
	sys, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return claimed{}, fmt.Errorf("engine: actor system: %w", err)
	}
	e.mu.Lock()
	e.actorSys = sys
	e.mu.Unlock()
	// hollywood has no engine to stop: the actors service poisons the actors, in order.
	e.tree.Add(svcActors, servicetree.OnStop{Name: svcActors, Stop: e.stopActors})
	e.watchPanics(sys)
	fp := e.opts.Failpoints
	var clk clock.Clock // the real one
	if r := failpoint.Rate(fp); r != 1 {
		clk = clock.Rate(r)
	}
	own, err := actors.SpawnOwnership(sys, actors.OwnershipConfig{
		Store: store,
		Lease: lease.Config{
			Me:             e.me,
			Lease:          e.cfg.NATS.Engine.Lease(),
			StandbyTimeout: e.cfg.NATS.Engine.StandbyTimeout(),
			Drain:          e.cfg.NATS.Engine.Drain(),
			Failpoints:     fp,
			Hot:            e.cfg.NATS.Engine.HotStandby(),
		},
		Logger:     e.log,
		OnEvent:    e.metrics.LeaseEvent,
		Clock:      clk,
		Failpoints: fp,
		Auto:       e.cfg.NATS.Engine.Role == config.RoleAuto,
	})
	if err != nil {
		return claimed{}, fmt.Errorf("engine: %w", err)
	}
	e.mu.Lock()
	e.ownership = own
	e.mu.Unlock()
	e.actorStops.Push("ownership", func(bound context.Context, c *closing) { e.stopOwnershipActors(bound, own, c) })
	state, err := own.Claim(ctx)
	return claimed{state: state, store: store, rivals: finder}, err
}

// stopOwnership stops the actors of a refused claim (the ownership tree) and the
// connections a client has no use for: the lease's and the service connection.
func (e *Engine) stopOwnership() {
	e.tree.Remove(svcActors)
	e.tree.Remove(svcService)
	e.tree.Remove(svcLease)
}

// loadServing builds what the engine serves and hands it to the root actor, which
// serves it now (serving) or at the takeover (standby): the stores first, then the
// members made on them.
func (e *Engine) loadServing(ctx context.Context, c conns, cl claimed) error {
	e.mu.Lock()
	e.role = config.RoleServe
	e.mu.Unlock()
	set := &servingSet{log: e.log, conn: c.service, askOn: c.lease, named: map[string]*actor.PID{}}
	st, err := e.openStores(ctx, set, cl)
	if err == nil {
		err = e.buildMembers(set, st)
	}
	// A set that failed half-built is kept too: the scrape reads what it holds, and the
	// teardown stops what it spawned.
	e.metrics.WatchServing(set.gauges)
	e.actorStops.Push("members", func(bound context.Context, c *closing) { e.stopMembers(bound, set, c) })
	e.mu.Lock()
	e.serving = set
	if err == nil {
		e.kv, e.objects = set.kv, set.objects
	}
	e.mu.Unlock()
	if err != nil {
		return err
	}
	root, err := actors.SpawnRoot(e.actorSys, actors.RootConfig{
		Ownership:  e.ownership,
		Jobs:       set.jobsPID,
		Members:    set.members,
		Drain:      e.cfg.NATS.Engine.Drain(),
		Successor:  set.waitSuccessor,
		AnyStandby: set.anyStandby,
		Sessions:   set.waitSessions,
		OnPhase:    e.metrics.HandoverPhase,
		Logger:     e.log,
		Failpoints: e.opts.Failpoints,
	})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	e.mu.Lock()
	e.root = root
	e.mu.Unlock()
	e.actorStops.Push("root", func(bound context.Context, _ *closing) {
		if err := root.Close(bound); err != nil {
			e.log.Warn("stopping the root actor", zap.Error(err))
		}
	})
	e.startWatch(root)
	e.watchRivals(cl.rivals)
	if err := e.serveControl(c.service); err != nil {
		return err
	}
	if cl.state == lease.StateServing {
		if err := root.WaitServing(ctx); err != nil {
			return err
		}
		e.log.Debug("engine serving", zap.String("lease_holder", e.me.String())) // the lease and the root logged it
	} else {
		e.log.Debug("engine standing by", zap.String("holder", e.ownership.Status().Holder.String())) // the lease logged it
	}
	return nil
}

// proveStores is a standby's check, before the root exists, that set's shared stores
// are the holder's, whose ids it reads in the lease bucket: a refused standby never
// serves.
func (e *Engine) proveStores(ctx context.Context, set *servingSet, leaseStore *jetstreamstore.Store) error {
	m, err := storeproof.Prove(ctx, leaseStore, e.ownership.Status().Holder, set.ids, e.cfg, e.log)
	if err != nil {
		return err
	}
	if m != nil {
		return e.opts.Errors.StoreMismatch(*m)
	}
	return nil
}
