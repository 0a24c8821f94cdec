// Package discovery is the module registry the serving engine hosts: modules (processes
// that serve agents, jobs and models, such as those `naas-abi-module` runs) register an
// instance under a membership lease, renew it, report that they are initialized or
// draining, and look each other up. It speaks the Python system's contract on the wire
// and in the store, so a Python engine and abi-engine can serve the same registry and
// hand it to each other.
//
// The registry is one protobuf RegistryState (proto/abi/discovery/v1) under the key
// "registry" of the JetStream KV bucket ABI_DISCOVERY_<project>. Every read goes
// through the stream leader; every write is a compare-and-swap on the revision it read,
// so any number of engines may serve it at once during a handover. The process keeps no
// authoritative state: a snapshot of the last read (used only to accept an agent's
// polls for up to a second), the mutations waiting for the writer, and the calls in
// flight.
//
// Service (service.go) is the registry's logic: validation (validate.go), the statuses
// and the choice of the serving rollout (status.go), the cycle check (cycles.go) and
// the group commit that folds concurrent mutations into one write (commit.go). Member
// (member.go, actor.go) serves it on the eight subjects
// abi.discovery.<project>.v1.<operation> in the queue group abi.discovery.<project>.owners,
// as plain request/reply subscriptions, and obeys the engine's role messages: it
// subscribes only while the engine serves, and its stop ends delivery at the broker
// (confirmed) before it answers what it had received.
//
// Expiry uses wall-clock Unix seconds, as the Python service does: expires_at is what the
// modules and the admin app show, and what a Python engine compares.
package discovery
