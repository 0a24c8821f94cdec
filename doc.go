// Package engine is abi-engine embedded in a Go program: it serves the kernel services
// (keyvalue, object_storage) and the program's own services over NATS, and guarantees
// that exactly one engine serves them per NATS account, by an ownership lease in the
// JetStream KV bucket ABI_ENGINE (package lease), driven by hollywood actors (package
// actors) under suture supervisors. docs/embedding.md is the guide with the whole
// public surface; this is the short of it.
//
// # Lifecycle
//
// New checks a configuration (package config) and the options, and connects to
// nothing: every configuration error, a rollout refused for local data included, is
// New's. Load starts the engine in its role and returns once it serves, stands by, or
// is a client; Shutdown hands over and ends it. Done is closed when the engine has
// ended, by Shutdown or on its own (Err says why: a lost lease, a standby that timed
// out).
//
//	e, err := engine.New(cfg, engine.WithService(svc), engine.WithJob(job), engine.WithLogger(log))
//	if err != nil { ... }          // a bad configuration or option, named
//	if err := e.Load(ctx); err != nil { ... } // *lease.AlreadyServingError: another engine serves
//	defer e.Shutdown(context.Background())
//
// # Roles
//
// In role serve (the default) the engine takes the lease and serves; with a rollout id
// (nats.engine.rollout_id) it stands by while an engine of another rollout serves and
// takes over when that one hands over, which needs every service's data shared
// between them. In role client every service is a NATS client of the serving engine
// (KeyValue, ObjectStorage). In role auto it serves when nobody does and is a client
// otherwise. State, Status, Ready and Healthy say where it stands; Epoch is the epoch
// it serves under.
//
// # Services and jobs
//
// WithService serves a Service of the program's own next to the kernel's, with
// everything a kernel service has: the per-call lease check, the handover's drain, the
// fence, metrics, a transfer host of its own for large payloads (Service.Transfers),
// the epoch for its writes (CallEpoch, Service.Fence) and its errors mapped to the
// protocol's codes (ErrorCodes). It declares where its data lives (SharedData,
// LocalData). Callers reach it with client.Service, on which a typed client is a few
// lines (package examples/counter has one). WithJob registers a Job that runs only on
// the serving engine and never on two at once.
//
// # Inside a larger program
//
// The engine installs no signal handler and calls no os.Exit: the program calls
// Shutdown from its own signal handling (a second signal cancels Shutdown's context,
// which stops what is left at once), and watches Done for an end on its own.
// WithSupervisor puts the engine's services (broker, connections, actors, backends) in
// the program's own suture tree; WithRegistry puts its metrics in the program's
// Prometheus registry; WithLogger logs through the program's zap logger.
package engine
