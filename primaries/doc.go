// Package primaries serves kernel services: a Primary is one NATS micro service per
// kernel service (name = the service, version 1.0.0, one endpoint per operation on
// abi.svc.<service>.v1.<operation>, micro's default queue group "q").
//
// micro delivers the calls of one endpoint one at a time, so the Primary's micro
// callback only counts a call and hands it to a worker goroutine; at most
// MaxConcurrent calls of a service run at once, and a call is counted as in flight from
// the moment the callback receives it until its reply is sent. Every call first checks
// the lease (design §5.8) and is refused with a retryable UNAVAILABLE, without running,
// when the engine has not confirmed its lease recently enough.
//
// A Primary is both a sessions.Host (the handover's StopAccepting, SessionsFinished and
// Stop) and, through Producer, a hollywood actor that obeys the role messages of
// package actors. Everything that must outlive the actor (the micro service, the call
// counters, the cancel functions, replies not yet sent) lives in the Primary, which the
// spawner owns; a restarted actor picks it up, so killing the actor loses no call.
//
// The sub-packages are the kernel services: keyvalue and objectstorage, each with its
// Store port, its backends and an exported contract suite.
package primaries
