package engine

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"fmt"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/node"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/sessions"
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
	errs       []error // what the options found wrong, in order
	tracer     trace.TracerProvider
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

// WithTracerProvider makes a span of every call the engine serves (service, operation,
// code, instance, epoch), the child of the caller's when the request carries a W3C
// traceparent, and a child span of each backend call it makes. Without it the engine
// traces nothing and a call costs nothing more. `abi-engine run` passes the provider
// of the telemetry: block (an OTLP/HTTP exporter); an embedder passes its own.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp == nil {
			o.fail(errors.New("engine: WithTracerProvider: the provider is nil (leave the option out for no traces)"))
			return
		}
		o.tracer = tp
	}
}

// Engine is one abi-engine: in role serve it holds the lease and serves the kernel
// services; in role client every service is a NATS client of the serving engine; in
// role auto it serves when nobody does and is a client otherwise.
type Engine struct {
	n *node.Engine // its wiring and lifecycle
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
	n, err := node.New(node.Config{
		Config:     cfg,
		Log:        o.log.With(zap.String("instance_id", o.instanceID)),
		Version:    o.version,
		InstanceID: o.instanceID,
		Services:   nodeServices(o.services),
		Jobs:       o.jobs,
		Registry:   o.registry,
		Tree:       o.tree,
		Failpoints: o.failpoints,
		Tracer:     o.tracer,
		Errors: node.Errors{Loaded: ErrLoaded, ShutDown: ErrShutDown, NoTarget: ErrNoTarget,
			Rival: rivalError, StoreMismatch: storeMismatchError},
	})
	if err != nil {
		return nil, err
	}
	return &Engine{n: n}, nil
}

// InstanceID is the engine's instance id: the lease holder's id and the owner of every
// session it hosts.
func (e *Engine) InstanceID() string { return e.n.InstanceID() }

// Config is the engine's configuration.
func (e *Engine) Config() *config.Config { return e.n.Config() }

// Registry holds the engine's metrics.
func (e *Engine) Registry() *prometheus.Registry { return e.n.Registry() }

// NATSURL is the broker the engine connects to (the embedded one's once loaded).
func (e *Engine) NATSURL() string { return e.n.NATSURL() }

// Role is the engine's effective role once loaded: serve or client (auto resolves to
// one of them).
func (e *Engine) Role() config.Role { return e.n.Role() }

// KeyValue is the keyvalue service: the local backend on a serving (or standby)
// engine, a NATS client of the serving engine on a client engine.
func (e *Engine) KeyValue() keyvalue.Store { return e.n.KeyValue() }

// ObjectStorage is the object_storage service, like KeyValue.
func (e *Engine) ObjectStorage() objectstorage.Store { return e.n.ObjectStorage() }

// Done is closed once the engine has ended: shut down, or ended on its own because the
// lease was lost or the standby timed out (Err says which).
func (e *Engine) Done() <-chan struct{} { return e.n.Done() }

// Err is why the engine ended on its own, nil otherwise.
func (e *Engine) Err() error { return e.n.Err() }

// Load starts the engine in its role. A serving engine claims the lease before it
// opens any backend, so an engine refused (*lease.AlreadyServingError) leaves nothing
// behind; a standby loads, returns, and serves once it takes the lease. An auto engine
// that finds another serving becomes a client. A failed Load gives up the lease and
// everything it started.
func (e *Engine) Load(ctx context.Context) error { return e.n.Load(ctx) }

// Shutdown hands over: jobs stop, the lease is released, shared subscriptions end at
// the broker, calls received are answered and sessions drain (up to drain_seconds),
// then everything is closed. ctx bounds it all: when it ends, what is left is stopped at
// once. Shutdown is safe to call twice and before Load; one that meets an end under
// way (a step-down's, a lost lease's) waits for it, and cuts its handover short when
// ctx ends.
func (e *Engine) Shutdown(ctx context.Context) error { return e.n.Shutdown(ctx) }

// InjectPanic makes one of the engine's actors panic, as a bug would, for the chaos
// harness and tests: the actor is restarted in place and keeps what its spawner holds
// (the lease, calls in flight, open sessions), except a transfer session's own actor,
// whose session ends (its next call is NOT_FOUND).
// Targets: "root", "ownership", "renewer", "fencer", "contender", "primary:<service>",
// "transfer:object_storage", "overflow", "jobs", and "session:<session id>" for one
// transfer session.
func (e *Engine) InjectPanic(target string) error { return e.n.InjectPanic(target) }

// SteppedDown reports whether the engine handed over because abi-engine step-down
// asked it to (its end is then a clean one, as after SIGTERM).
func (e *Engine) SteppedDown() bool { return e.n.SteppedDown() }

// StepDownStay reports whether that step-down asked the process to stay as a standby.
func (e *Engine) StepDownStay() bool { return e.n.StepDownStay() }
