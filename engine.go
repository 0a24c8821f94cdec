package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
	"github.com/abi-engine/engine/supervisor"
	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// Job is work an embedder registers; it runs only on the serving engine.
type Job = actors.Job

// Every schedules a job at a fixed interval.
type Every = actors.Every

// ErrLoaded is returned by a second Load.
var ErrLoaded = errors.New("engine: already loaded")

// ErrShutDown is returned by Load after Shutdown.
var ErrShutDown = errors.New("engine: shut down")

// Option adjusts an Engine.
type Option func(*options)

type options struct {
	log        *zap.Logger
	version    string
	instanceID string
	services   []primaries.Service
	jobs       []Job
	registry   *prometheus.Registry
}

// WithLogger logs through log (default: no logs).
func WithLogger(log *zap.Logger) Option { return func(o *options) { o.log = log } }

// WithVersion is the version written into the lease record.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithInstanceID fixes the engine's instance id (32 lowercase hex); by default each
// engine draws a new one.
func WithInstanceID(id string) Option { return func(o *options) { o.instanceID = id } }

// WithService serves an embedder's own service next to the kernel ones, by a
// ServicePrimary like theirs, with the same lease, handover and fencing.
func WithService(s primaries.Service) Option {
	return func(o *options) { o.services = append(o.services, s) }
}

// WithJob registers a job; it runs only while this engine serves.
func WithJob(j Job) Option { return func(o *options) { o.jobs = append(o.jobs, j) } }

// WithRegistry registers the engine's metrics in reg instead of a registry of its own.
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.registry = reg } }

// Engine is one abi-engine: in role serve it holds the lease and serves the kernel
// services; in role client every service is a NATS client of the serving engine; in
// role auto it serves when nobody does and is a client otherwise.
type Engine struct {
	cfg     *config.Config
	opts    options
	log     *zap.Logger
	metrics *metrics
	me      lease.Holder

	mu       sync.Mutex
	loaded   bool
	up       bool // Load returned successfully
	shutdown bool
	role     config.Role // effective: serve or client once loaded
	done     chan struct{}
	endErr   error
	stopOnce sync.Once

	// runtime, set by Load
	tree       *suture.Supervisor
	treeCancel context.CancelFunc
	treeDone   <-chan error
	broker     *supervisor.Broker
	natsURL    string
	leaseConn  *nats.Conn
	svcConn    *nats.Conn
	actorSys   *actor.Engine
	ownership  *actors.Ownership
	root       *actors.Root
	serving    *servingSet
	kv         keyvalue.Store
	objects    objectstorage.Store
	transport  *client.Transport
	watchers   sync.WaitGroup
	stopPanics func() // ends the watch of the actors' panics
}

// New checks cfg and the options; it connects to nothing.
func New(cfg *config.Config, opts ...Option) (*Engine, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{version: "dev"}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.instanceID == "" {
		o.instanceID = sessions.NewOwnerID()
	}
	if !sessions.ValidOwnerID(o.instanceID) {
		return nil, fmt.Errorf("engine: instance id %q is not 32 lowercase hex digits", o.instanceID)
	}
	if _, err := actors.NewJobsHost(o.jobs, nil, nil); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	seen := map[string]bool{protocol.KeyValue: true, protocol.ObjectStorage: true}
	for _, s := range o.services {
		if seen[s.Name] {
			return nil, fmt.Errorf("engine: a service named %q is served already", s.Name)
		}
		seen[s.Name] = true
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	e := &Engine{
		cfg:  cfg,
		opts: o,
		log:  o.log.With(zap.String("instance_id", o.instanceID)),
		done: make(chan struct{}),
	}
	e.me = lease.ThisProcess(o.instanceID, o.version, cfg.NATS.Engine.LeaseRolloutID(), time.Now())
	m, err := newMetrics(o.registry, e)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	return e, nil
}

// InstanceID is the engine's instance id: the lease holder's id and the owner of every
// session it hosts.
func (e *Engine) InstanceID() string { return e.opts.instanceID }

// Config is the engine's configuration.
func (e *Engine) Config() *config.Config { return e.cfg }

// Registry holds the engine's metrics.
func (e *Engine) Registry() *prometheus.Registry { return e.opts.registry }

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
	case e.shutdown:
		e.mu.Unlock()
		return ErrShutDown
	case e.loaded:
		e.mu.Unlock()
		return ErrLoaded
	}
	e.loaded = true
	e.mu.Unlock()
	start := time.Now()
	defer func() {
		if err != nil {
			e.teardown(context.Background())
			e.finish(nil)
			return
		}
		e.metrics.loadSeconds.Set(time.Since(start).Seconds())
		e.mu.Lock()
		e.up = true
		e.mu.Unlock()
	}()

	// The configuration, the shared-backend check included, was validated by New:
	// nothing has been touched yet.
	e.startTree()
	url, err := e.brokerURL(ctx)
	if err != nil {
		return err
	}
	role := e.cfg.NATS.Engine.Role
	if role == config.RoleClient {
		return e.loadClient(ctx, url)
	}
	state, err := e.claim(ctx, url)
	var already *lease.AlreadyServingError
	if errors.As(err, &already) && role == config.RoleAuto {
		e.log.Info("another engine serves: this auto engine is a client", zap.String("holder", already.Holder.String()))
		e.stopOwnership(ctx)
		return e.loadClient(ctx, url)
	}
	if err != nil {
		return err
	}
	return e.loadServing(ctx, state)
}

// loadClient makes every service a NATS client of the serving engine: no lease, no
// backend, no file, no subscription.
func (e *Engine) loadClient(ctx context.Context, url string) error {
	nc, err := e.dial(ctx, url, "client")
	if err != nil && e.cfg.NATS.EmbeddedBroker() {
		return fmt.Errorf("engine: nats.url is empty, so this client looked for the NATS server of a serving engine at %s (nats.embedded.listen), and it starts none itself: %w",
			e.cfg.NATS.Embedded.Listen, err)
	}
	if err != nil {
		return err
	}
	tr, err := client.NewTransport(nc, client.WithCounters(e.metrics.clientCounters),
		client.WithDefaultTimeout(e.cfg.NATS.ClientTimeout()))
	if err != nil {
		nc.Close()
		return fmt.Errorf("engine: %w", err)
	}
	e.mu.Lock()
	e.role = config.RoleClient
	e.svcConn = nc
	e.transport = tr
	e.kv = client.NewKeyValue(tr)
	e.objects = client.NewObjectStorage(tr)
	e.mu.Unlock()
	e.log.Info("client engine loaded: every service is a NATS client of the serving engine")
	return nil
}

// claim connects the lease's own connection, so a busy service connection never delays
// a renewal, and takes (or waits for) the lease.
func (e *Engine) claim(ctx context.Context, url string) (lease.State, error) {
	nc, err := e.dial(ctx, url, "lease")
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	e.leaseConn = nc
	e.mu.Unlock()
	store, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{Replicas: e.cfg.NATS.Engine.LeaseReplicas})
	if err != nil {
		return 0, fmt.Errorf("engine: open the lease: %w", err)
	}
	sys, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return 0, fmt.Errorf("engine: actor system: %w", err)
	}
	e.watchPanics(sys)
	own, err := actors.SpawnOwnership(sys, actors.OwnershipConfig{
		Store: store,
		Lease: lease.Config{
			Me:             e.me,
			Lease:          e.cfg.NATS.Engine.Lease(),
			StandbyTimeout: e.cfg.NATS.Engine.StandbyTimeout(),
		},
		Logger:  e.log,
		OnEvent: e.metrics.leaseEvent,
	})
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	e.mu.Lock()
	e.actorSys, e.ownership = sys, own
	e.mu.Unlock()
	return own.Claim(ctx)
}

// stopOwnership stops the ownership tree of a refused claim and its connection.
func (e *Engine) stopOwnership(ctx context.Context) {
	e.mu.Lock()
	own, nc := e.ownership, e.leaseConn
	e.ownership, e.leaseConn = nil, nil
	e.mu.Unlock()
	if own != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := own.Stop(sctx); err != nil {
			e.log.Warn("stopping the ownership", zap.Error(err))
		}
	}
	if nc != nil {
		nc.Close()
	}
}

// loadServing opens the backends, builds the primaries and hosts, and hands them to
// the root actor, which serves them now (serving) or at the takeover (standby).
func (e *Engine) loadServing(ctx context.Context, state lease.State) error {
	nc, err := e.dial(ctx, e.NATSURL(), "service")
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.svcConn = nc
	e.role = config.RoleServe
	e.mu.Unlock()
	set, err := e.buildServing(ctx, nc)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.serving = set
	e.kv, e.objects = set.kv, set.objects
	e.mu.Unlock()
	root, err := actors.SpawnRoot(e.actorSys, actors.RootConfig{
		Ownership: e.ownership,
		Jobs:      set.jobsPID,
		Members:   set.members,
		Drain:     e.cfg.NATS.Engine.Drain(),
		Sessions:  set.waitSessions,
		OnPhase:   e.metrics.handoverPhase,
		Logger:    e.log,
	})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	e.mu.Lock()
	e.root = root
	e.mu.Unlock()
	e.watchers.Add(1)
	go e.watchEnd(root)
	if state == lease.StateServing {
		if err := root.WaitServing(ctx); err != nil {
			return err
		}
		e.log.Info("engine serving", zap.String("lease_holder", e.me.String()))
	} else {
		e.log.Info("engine standing by", zap.String("holder", e.ownership.Status().Holder.String()))
	}
	return nil
}

// watchEnd ends the engine when the root says it must: a lost lease, or a standby whose
// claim ended (timed out, or another engine of its rollout took the released lease).
func (e *Engine) watchEnd(root *actors.Root) {
	defer e.watchers.Done()
	select {
	case <-root.Ended():
	case <-e.done:
		return
	}
	if err := root.Err(); err != nil {
		e.log.Error("engine ending", zap.Error(err))
		e.teardown(context.Background())
		e.finish(err)
	}
}

// ErrNoTarget is returned by InjectPanic for a target the engine does not have.
var ErrNoTarget = errors.New("engine: no such actor")

// InjectPanic makes one of the engine's actors panic, as a bug would, for the chaos
// harness and tests: the actor is restarted in place and keeps what its spawner holds
// (the lease, calls in flight, open sessions), except a transfer session's own actor,
// whose session ends (its next call is NOT_FOUND).
// Targets: "root", "ownership", "renewer", "fencer", "contender", "primary:<service>",
// "transfer:object_storage", "overflow", "jobs", and "session:<session id>" for one
// transfer session.
func (e *Engine) InjectPanic(target string) error {
	e.mu.Lock()
	sys, own, root, set := e.actorSys, e.ownership, e.root, e.serving
	e.mu.Unlock()
	if sys == nil || own == nil {
		return fmt.Errorf("%w: %q (the engine runs no actors)", ErrNoTarget, target)
	}
	var pid *actor.PID
	switch {
	case target == "ownership":
		pid = own.PID()
	case target == actors.RenewerName || target == actors.FencerName || target == actors.ContenderName:
		pid = own.Child(target)
	case target == "root" && root != nil:
		pid = root.PID()
	case strings.HasPrefix(target, "session:") && set != nil:
		id := strings.TrimPrefix(target, "session:")
		for _, h := range set.transfers {
			if p := h.SessionPID(id); p != nil {
				pid = p
			}
		}
	case set != nil:
		pid = set.named[target]
	}
	if pid == nil {
		return fmt.Errorf("%w: %q", ErrNoTarget, target)
	}
	sys.Send(pid, actors.Kill{Reason: "injected by InjectPanic"})
	return nil
}

// Shutdown hands over: jobs stop, the lease is released, shared subscriptions end at
// the broker, calls received are answered and sessions drain (up to drain_seconds),
// then everything is closed. ctx bounds it all: when it ends, what is left is stopped at
// once. Shutdown is safe to call twice and before Load.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	if e.shutdown || !e.loaded {
		e.shutdown = true
		loaded := e.loaded
		e.mu.Unlock()
		if loaded {
			select {
			case <-e.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	e.shutdown = true
	root := e.root
	e.mu.Unlock()
	var err error
	if root != nil {
		start := time.Now()
		if err = root.Handover(ctx); err != nil {
			e.log.Warn("handover cut short", zap.Error(err))
		}
		e.log.Info("handover done", zap.Duration("took", time.Since(start)))
	}
	e.teardown(ctx)
	e.finish(nil)
	return err
}

// teardown stops what Load started, in order: members (and the answers to what they
// had received), actors, backends, connections, the broker. It is idempotent.
func (e *Engine) teardown(ctx context.Context) {
	e.mu.Lock()
	set, root, sys, own, stopPanics := e.serving, e.root, e.actorSys, e.ownership, e.stopPanics
	svc, lc, cancel, treeDone := e.svcConn, e.leaseConn, e.treeCancel, e.treeDone
	e.serving, e.root, e.ownership, e.svcConn, e.leaseConn, e.treeCancel, e.stopPanics = nil, nil, nil, nil, nil, nil, nil
	e.mu.Unlock()
	bound, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	if set != nil {
		set.stop()
		set.answerReceived(bound) // before anything closes: see answerReceived
	}
	if root != nil {
		if err := root.Close(bound); err != nil {
			e.log.Warn("stopping the root actor", zap.Error(err))
		}
	}
	if set != nil {
		set.poison(bound, sys)
		if set.jobs != nil {
			if err := set.jobs.Close(bound); err != nil {
				e.log.Warn("closing the jobs", zap.Error(err))
			}
		}
	}
	if own != nil {
		if s := own.Status().State; s == lease.StateServing || s == lease.StateFenced {
			// A failed Load or an end on its own: give the lease up.
			if _, err := own.Release(bound); err != nil {
				e.log.Warn("releasing the lease", zap.Error(err))
			}
		}
		if err := own.Stop(bound); err != nil {
			e.log.Warn("stopping the ownership", zap.Error(err))
		}
	}
	if stopPanics != nil {
		stopPanics()
	}
	if set != nil {
		set.close()
	}
	if svc != nil {
		_ = svc.FlushTimeout(time.Second)
		svc.Close()
	}
	if lc != nil {
		lc.Close()
	}
	if cancel != nil {
		cancel()
		<-treeDone
	}
}

func (e *Engine) finish(err error) {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.endErr = err
		e.mu.Unlock()
		close(e.done)
	})
}
