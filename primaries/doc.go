// Package primaries serves kernel services: a Primary is one NATS micro service per
// kernel service (name = the service, version 1.0.0, one endpoint per operation on
// abi.svc.<service>.v1.<operation>, micro's default queue group "q").
//
// micro delivers the calls of one endpoint one at a time, so the Primary's micro
// callback only counts a call and hands it to a worker goroutine; at most
// MaxConcurrent calls of a service run at once, and a call is counted as in flight from
// the moment the callback receives it until its reply is sent. Every call first checks
// the lease (docs/design.md §5.8) and is refused with a retryable UNAVAILABLE, without running,
// when the engine has not confirmed its lease recently enough. That hot path (call.go,
// reply.go) never goes through the actor.
//
// The role (serve, stop accepting and drain, stop) is played by the primary's hollywood
// actor (Producer, Spawn), which obeys the role messages of package actors and plays
// them with its member protocol (actors.RolePhase, RoleQueue, StartStep, AskRole),
// supplying only its steps. It keeps the phase, the command in progress and those
// waiting, and the runs (serving periods) as plain fields touched only in Receive
// (role.go); every broker step runs on a goroutine it starts, which reports back by
// message (steps.go). Those fields, the
// micro service, the call counters and the cancel functions live in the Primary, which
// the spawner owns, so an actor restarted after a panic, or spawned again after the
// last was poisoned, carries on and killing the actor loses no call (docs/design.md §3). The
// methods (InFlight, SessionsFinished, the sessions.Host commands) read the view the
// actor publishes, and hand commands to it by message; Close stops everything for good,
// from that view when no actor runs.
//
// A service on a shared backend has Config.Fence: the serve step adopts the engine's
// epoch there before it subscribes (docs/architecture.md "Epoch"), so every write the
// backend makes carries it, and a stale engine subscribes nothing.
//
// The sub-packages are the kernel services: keyvalue and objectstorage, each with its
// Store port, its backends and an exported contract suite.
package primaries
