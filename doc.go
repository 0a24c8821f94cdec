// Package engine is abi-engine embedded in a Go program: it serves kernel services over
// NATS and guarantees that exactly one engine serves them per NATS account, by an
// ownership lease in the JetStream KV bucket ABI_ENGINE (package lease), driven by
// hollywood actors (package actors) under suture supervisors.
//
// The root package is the only one that knows all the others; every other package has
// one job (see README.md and docs/architecture.md).
package engine
