package engine

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/servicetree"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/sessions"
	"github.com/abi-engine/engine/supervisor"
	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// Job is work an embedder registers (WithJob): it runs only on the serving engine, is
// stopped first in a handover and at once at a fence, and never runs on two engines at
// the same time.
type Job = actors.Job

// Every schedules a job at a fixed interval (Job.Schedule).
type Every = actors.Every

// ErrLoaded is returned by a second Load.
var ErrLoaded = errors.New("engine: already loaded")

// ErrShutDown is returned by Load after Shutdown.
var ErrShutDown = errors.New("engine: shut down")

// Option adjusts an Engine (New). An option given a value it cannot use makes New fail
// with an error naming the option.
type Option func(*options)

type options struct {
	log        *zap.Logger
	version    string
	instanceID string
	services   []Service
	jobs       []Job
	registry   *prometheus.Registry
	tree       *suture.Supervisor
	failpoints *failpoint.Set
	errs       []error              // what the options found wrong, in order
	tracer     trace.TracerProvider // telemetry.go
}

func (o *options) fail(err error) { o.errs = append(o.errs, err) }

// WithLogger logs through log (default: no logs).
func WithLogger(log *zap.Logger) Option {
	return func(o *options) {
		if log == nil {
			o.fail(errors.New("engine: WithLogger: the logger is nil (leave the option out for no logs)"))
			return
		}
		o.log = log
	}
}

// WithVersion is the version written into the lease record ("dev" by default).
func WithVersion(v string) Option {
	return func(o *options) {
		if v == "" {
			o.fail(errors.New("engine: WithVersion: the version is empty"))
			return
		}
		o.version = v
	}
}

// WithInstanceID fixes the engine's instance id (32 lowercase hex); by default each
// engine draws a new one.
func WithInstanceID(id string) Option {
	return func(o *options) {
		if !sessions.ValidOwnerID(id) {
			o.fail(fmt.Errorf("engine: WithInstanceID(%q): an instance id is 32 lowercase hex digits", id))
			return
		}
		o.instanceID = id
	}
}

// WithService serves an embedder's own service next to the kernel ones, with the same
// lease, handover and fencing (see Service). New refuses a service that is not
// complete, a second one of the same name, and a local one on an engine with a
// rollout id.
func WithService(s Service) Option {
	return func(o *options) {
		if err := s.validate(); err != nil {
			o.fail(err)
			return
		}
		o.services = append(o.services, s)
	}
}

// WithJob registers a job; it runs only while this engine serves.
func WithJob(j Job) Option {
	return func(o *options) {
		if err := j.Validate(); err != nil {
			o.fail(fmt.Errorf("engine: WithJob: %w", err))
			return
		}
		o.jobs = append(o.jobs, j)
	}
}

// WithRegistry registers the engine's metrics in reg instead of a registry of its own,
// so they appear on the embedder's /metrics (names prefixed abi_engine_).
func WithRegistry(reg *prometheus.Registry) Option {
	return func(o *options) {
		if reg == nil {
			o.fail(errors.New("engine: WithRegistry: the registry is nil (leave the option out for one of the engine's own)"))
			return
		}
		o.registry = reg
	}
}

// WithSupervisor runs the engine's services (the embedded broker, the NATS connections,
// the actors, the backends) in tree, a suture supervisor its caller serves, instead of
// in a tree of the engine's own: `abi-engine run` keeps its HTTP server and signal
// handler beside them, so the process has one tree. tree must be running when Load is
// called; the engine removes its services from it, in order, when it ends, and the
// caller stops tree after that. A nil tree is the default: a tree of the engine's own.
func WithSupervisor(tree *suture.Supervisor) Option { return func(o *options) { o.tree = tree } }

// WithFailpoints switches the fail points of set on in the engine (package
// internal/failpoint; a build with the tag failpoints). The chaos harness uses it to
// show that its checkers catch real bugs; nil, the default, switches none on.
func WithFailpoints(set *failpoint.Set) Option { return func(o *options) { o.failpoints = set } }

// Engine is one abi-engine: in role serve it holds the lease and serves the kernel
// services; in role client every service is a NATS client of the serving engine; in
// role auto it serves when nobody does and is a client otherwise.
type Engine struct {
	cfg     *config.Config
	opts    options
	log     *zap.Logger
	metrics *metrics
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
	leaseConn  *nats.Conn            // the lease's own connection (claim), set before loadServing reads it
	leaseStore *jetstreamstore.Store // the lease bucket (claim): the store ids are published there
	actorSys   *actor.Engine
	ownership  *actors.Ownership
	root       *actors.Root
	serving    *servingSet
	kv         keyvalue.Store
	objects    objectstorage.Store
	actorStops *servicetree.Stopper[closing] // stops the actors, last built first

	// the embedded broker this engine started, whose store lock teardown lets go; and
	// how an engine with no URL found another engine's broker instead (brokerURL), ""
	// when it uses nats.url or its own
	broker      *supervisor.Broker
	foundBroker string
	// the watch of rivals (rival.go), set by the claim
	rivals rivalWatch

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

// New checks cfg and the options; it connects to nothing.
func New(cfg *config.Config, opts ...Option) (*Engine, error) {
	if cfg == nil {
		cfg = config.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{version: "dev"}
	for i, opt := range opts {
		if opt == nil {
			o.fail(fmt.Errorf("engine: option %d of New is nil", i))
			continue
		}
		opt(&o)
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.instanceID == "" {
		o.instanceID = sessions.NewOwnerID()
	}
	if _, err := actors.NewJobsHost(o.jobs, nil, nil); err != nil {
		return nil, fmt.Errorf("engine: WithJob: %w", err)
	}
	seen := map[string]bool{}
	for _, s := range o.services {
		if seen[s.Name] {
			return nil, fmt.Errorf("engine: WithService(%q): a service of that name is served already", s.Name)
		}
		seen[s.Name] = true
	}
	// The embedder's services count in the shared-backend check as the kernel's do,
	// before anything is touched (docs/design.md §5.6).
	if err := localServices(cfg, o.services); err != nil {
		return nil, err
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	e := &Engine{
		cfg:       cfg,
		opts:      o,
		log:       o.log.With(zap.String("instance_id", o.instanceID)),
		done:      make(chan struct{}),
		stopWatch: make(chan struct{}),
	}
	e.tree = servicetree.New(o.tree, e.log, treeTimeout)
	e.actorStops = servicetree.NewStopper[closing](e.log, teardownBound)
	if spec := failpoint.String(o.failpoints); spec != "" {
		e.log.Warn("fail points on: this engine misbehaves on purpose (chaos)", zap.String("failpoints", spec))
		failpoint.Notify(o.failpoints, func(n failpoint.Name, detail string) {
			e.log.Warn("fail point fired: "+detail, zap.String("failpoint", string(n)))
		})
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
	case e.stage == stageEnded && (e.end == nil || e.end.kind == endShutdown):
		e.mu.Unlock()
		return ErrShutDown
	case e.stage != stageNew:
		e.mu.Unlock()
		return ErrLoaded
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
		e.metrics.loadSeconds.Set(time.Since(start).Seconds())
		e.mu.Lock()
		if e.stage == stageLoading {
			e.stage = stageUp
		}
		e.mu.Unlock()
	}()

	// The configuration, the shared-backend check included, was validated by New:
	// nothing has been touched yet.
	e.tree.Start()
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
		e.stopOwnership()
		return e.loadClient(ctx, url)
	}
	if err != nil {
		return e.refusal(err)
	}
	return e.loadServing(ctx, state)
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
