// Package node is one engine's wiring and lifecycle behind the root package's API: Load
// connects, claims the lease, opens the stores and builds the members and the root
// actor, each handed to the supervision tree that owns it from then on; the
// one ending runs the end's cascade and the teardown; View is the one published view
// of where the engine stands, which /status, the metrics and step-down read. The root
// package (the embedder's API) checks the options and converts what it is given into
// a Config; nothing else imports this package.
package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/enginemetrics"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/rivals"
	"github.com/abi-engine/engine/internal/servicetree"
	"github.com/abi-engine/engine/internal/storeproof"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/supervisor"
	"github.com/anthdm/hollywood/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// Config is what the root package's New checked and made of its options.
type Config struct {
	Config     *config.Config // validated
	Log        *zap.Logger    // the engine's, with its instance id
	Version    string
	InstanceID string
	Services   []Service // the embedder's, each checked
	Jobs       []actors.Job
	Registry   *prometheus.Registry
	Tree       *suture.Supervisor // nil: a tree of the engine's own
	Failpoints *failpoint.Set
	Tracer     trace.TracerProvider // nil: no traces
	Errors     Errors
}

// Errors are the root package's public errors, which this package cannot name: the
// sentinels it returns, and how it makes the error types.
type Errors struct {
	Loaded   error // a second Load
	ShutDown error // a Load after Shutdown
	NoTarget error // InjectPanic of a target the engine does not have

	Rival         func(rivals.Rival) error
	StoreMismatch func(storeproof.Mismatch) error
}

// Engine is one engine's running state behind the root package's Engine.
type Engine struct {
	cfg     *config.Config
	opts    Config
	log     *zap.Logger
	metrics *enginemetrics.Metrics
	me      lease.Holder
	// tree owns everything Load starts (tree.go); teardown stops it in order.
	tree *servicetree.Tree

	mu     sync.Mutex
	stage  stage       // the one lifecycle (lifecycle.go)
	end    *ending     // the end, once one began
	role   config.Role // effective: serve or client once loaded
	done   chan struct{}
	endErr error
	ending sync.WaitGroup // the ending's goroutine (beginEnd)
	counts endCounts      // what the end stopped and released

	// runtime, set by Load; the tree's services stop what they hold
	natsURL    string
	actorSys   *actor.Engine
	ownership  *actors.Ownership
	root       *actors.Root
	serving    *servingSet
	kv         keyvalue.Store
	objects    objectstorage.Store
	actorStops *servicetree.Stopper[closing] // stops the actors, last built first

	// the embedded broker this engine started, whose store lock teardown lets go
	broker *supervisor.Broker

	// a step-down asked to stay a standby after its handover (stepdown.go)
	stepDownStay atomic.Bool
	// steppingDown is set by the first step-down request: a second one, or one that
	// meets an eviction, is answered NOT_SERVING rather than racing it.
	steppingDown atomic.Bool

	// the watch of the root's end (startWatch), which the engine stops and waits for
	watchers      sync.WaitGroup
	stopWatch     chan struct{}
	stopWatchOnce sync.Once
}

// New makes the engine of c; it connects to nothing.
func New(c Config) (*Engine, error) {
	e := &Engine{
		cfg:       c.Config,
		opts:      c,
		log:       c.Log,
		done:      make(chan struct{}),
		stopWatch: make(chan struct{}),
	}
	e.tree = servicetree.New(c.Tree, e.log, treeTimeout)
	e.actorStops = servicetree.NewStopper[closing](e.log, teardownBound)
	if spec := failpoint.String(c.Failpoints); spec != "" {
		e.log.Warn("fail points on: this engine misbehaves on purpose (chaos)", zap.String("failpoints", spec))
		failpoint.Notify(c.Failpoints, func(n failpoint.Name, detail string) {
			e.log.Warn("fail point fired: "+detail, zap.String("failpoint", string(n)))
		})
	}
	e.me = lease.ThisProcess(c.InstanceID, c.Version, e.cfg.NATS.Engine.LeaseRolloutID(), time.Now())
	m, err := enginemetrics.New(c.Registry, e.cfg.NATS.Engine.Role == config.RoleAuto, c.Version, e.log, e.scrape)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	return e, nil
}

// InstanceID is the engine's instance id: the lease holder's id and the owner of every
// session it hosts.
func (e *Engine) InstanceID() string { return e.opts.InstanceID }

// Config is the engine's configuration.
func (e *Engine) Config() *config.Config { return e.cfg }

// Registry holds the engine's metrics.
func (e *Engine) Registry() *prometheus.Registry { return e.opts.Registry }

// NATSURL is the broker the engine connects to (the embedded one's once loaded).
func (e *Engine) NATSURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.natsURL != "" {
		return e.natsURL
	}
	return e.cfg.NATS.URL
}

// Role is the engine's effective role once loaded: serve or client (auto resolves to
// one of them).
func (e *Engine) Role() config.Role {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.role == "" {
		return e.cfg.NATS.Engine.Role
	}
	return e.role
}

// KeyValue is the keyvalue service: the local backend on a serving (or standby)
// engine, a NATS client of the serving engine on a client engine.
func (e *Engine) KeyValue() keyvalue.Store {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kv
}

// ObjectStorage is the object_storage service, like KeyValue.
func (e *Engine) ObjectStorage() objectstorage.Store {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.objects
}

// Done is closed once the engine has ended: shut down, or ended on its own because the
// lease was lost or the standby timed out (Err says which).
func (e *Engine) Done() <-chan struct{} { return e.done }

// Err is why the engine ended on its own, nil otherwise.
func (e *Engine) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.endErr
}

// Load starts the engine in its role. A serving engine claims the lease before it
// opens any backend, so an engine refused (*lease.AlreadyServingError) leaves nothing
// behind; a standby loads, returns, and serves once it takes the lease. An auto engine
// that finds another serving becomes a client. A failed Load gives up the lease and
// everything it started.
func (e *Engine) Load(ctx context.Context) (err error) {
	e.mu.Lock()
	switch {
	case e.stage == stageEnded && (e.end == nil || e.end.kind == endShutdown):
		e.mu.Unlock()
		return e.opts.Errors.ShutDown
	case e.stage != stageNew:
		e.mu.Unlock()
		return e.opts.Errors.Loaded
	}
	e.stage = stageLoading
	e.mu.Unlock()
	start := time.Now()
	defer func() {
		if err != nil {
			// The one end, as every other; one begun meanwhile (a lost lease, a
			// Shutdown) is joined.
			if end, started := e.beginEnd(endFailedLoad, nil); end != nil {
				_ = e.waitEnd(context.Background(), end, started)
			}
			return
		}
		e.metrics.LoadSeconds.Set(time.Since(start).Seconds())
		e.mu.Lock()
		if e.stage == stageLoading {
			e.stage = stageUp
		}
		e.mu.Unlock()
	}()

	// The configuration, the shared-backend check included, was validated by New:
	// nothing has been touched yet.
	e.tree.Start()
	role := e.cfg.NATS.Engine.Role
	c, err := e.connect(ctx, conns{}, role)
	if err != nil {
		return err
	}
	if role != config.RoleClient {
		// The lease bucket, on the lease's own connection, so a busy service connection
		// never delays a renewal.
		store, err := jetstreamstore.Open(ctx, c.lease, jetstreamstore.Config{
			Replicas: e.cfg.NATS.Engine.LeaseReplicas, Domain: e.cfg.NATS.JetStream.Domain})
		if err != nil {
			return fmt.Errorf("engine: open the lease: %w", err)
		}
		cl, err := e.claim(ctx, c.lease, store)
		var already *lease.AlreadyServingError
		switch {
		case errors.As(err, &already) && role == config.RoleAuto:
			e.log.Info("another engine serves: this auto engine is a client", zap.String("holder", already.Holder.String()))
			e.stopOwnership()
			if c, err = e.connect(ctx, c, config.RoleClient); err != nil {
				return err
			}
		case err != nil:
			return refusal(err, c.found)
		default:
			return e.loadServing(ctx, c, cl)
		}
	}
	return e.loadClient(c.client)
}

// Shutdown hands over: jobs stop, the lease is released, shared subscriptions end at
// the broker, calls received are answered and sessions drain (up to drain_seconds),
// then everything is closed. ctx bounds it all: when it ends, what is left is stopped at
// once. Shutdown is safe to call twice and before Load; one that meets an end under
// way (a step-down's, a lost lease's) waits for it, and cuts its handover short when
// ctx ends.
func (e *Engine) Shutdown(ctx context.Context) error {
	end, started := e.beginEnd(endShutdown, nil)
	if end == nil {
		return nil
	}
	return e.waitEnd(ctx, end, started)
}

// Version is the version written into the lease record.
func (e *Engine) Version() string { return e.opts.Version }
