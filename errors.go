package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/abi-engine/engine/internal/rivals"
	"github.com/abi-engine/engine/internal/storeproof"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
)

// This file is the engine's public error types, which the wiring (internal/node) makes
// through node.Errors.

// RivalError is a claim refused because an engine that holds no lease this engine can
// see answers the kernel services on the account: it keeps its lease somewhere else,
// most likely in another JetStream domain. abi-engine run exits 3, as for an engine
// that holds the lease; an auto engine becomes a client of it.
type RivalError struct {
	// Instance and Version are the other engine's, from its services' answers.
	Instance, Version string
	// Services are the services it answered.
	Services []string
	// Domain is this engine's nats.jetstream.domain ("": the connected server's).
	Domain string
	// Holder is the lease this engine sees (zero: free).
	Holder lease.Holder
}

// Error names the other engine, where this one looked for its lease, and the fix.
func (e *RivalError) Error() string {
	where := "the JetStream of the server this engine is connected to"
	if e.Domain != "" {
		where = "JetStream domain " + e.Domain
	}
	seen := "the lease there is free"
	if e.Holder.InstanceID != "" {
		seen = "the lease there is held by " + e.Holder.InstanceID
	}
	return fmt.Sprintf("another engine, instance %s (version %s), answers %s on this NATS account, but it holds no lease in %s (%s): "+
		"it keeps its lease in another JetStream domain, and both would serve. Set nats.jetstream.domain to the same domain on every engine of the account (abi-engine doctor lists the domains)",
		e.Instance, orUnknown(e.Version), strings.Join(e.Services, " and "), where, seen)
}

// Unwrap makes it an *lease.AlreadyServingError: another engine serves.
func (e *RivalError) Unwrap() error {
	return &lease.AlreadyServingError{Holder: lease.Holder{InstanceID: e.Instance, Version: e.Version}}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// rivalError is node.Errors.Rival.
func rivalError(r rivals.Rival) error {
	return &RivalError{Instance: r.Instance, Version: r.Version, Services: r.Services, Domain: r.Domain, Holder: r.Holder}
}

// StoreMismatchError is a standby refused because a shared backend of its does not
// reach the store the serving engine's does.
type StoreMismatchError struct {
	Service string
	Holder  lease.Holder
	Theirs  jetstreamstore.StoreProof // what the holder published
	Ours    storeID                   // what this engine's backend reaches (ID empty: none that can be named)
}

// Error names the service, the holder, both backends and both stores.
func (e *StoreMismatchError) Error() string {
	ours := fmt.Sprintf("reaches %s store %s (%s)", e.Ours.backend, e.Ours.ID, e.Ours.Where)
	if e.Ours.ID == "" {
		ours = fmt.Sprintf("has a %s backend, which is not that store", e.Ours.backend)
	}
	return fmt.Sprintf("engine: services.%s does not reach the store of the serving engine %s: it uses %s store %s (%s), this engine %s; "+
		"a standby must reach the same store, or what was written before the handover would be gone after it: refusing to stand by",
		e.Service, e.Holder, e.Theirs.Backend, e.Theirs.ID, e.Theirs.Where, ours)
}

// ErrStoreMismatch matches every *StoreMismatchError.
var ErrStoreMismatch = errors.New("engine: a shared backend does not reach the serving engine's store")

// Is makes errors.Is(err, ErrStoreMismatch) true.
func (e *StoreMismatchError) Is(target error) bool { return target == ErrStoreMismatch }

// storeID names the store a backend reaches.
type storeID struct {
	backend   string // the adapter
	ID, Where string
}

// storeMismatchError is node.Errors.StoreMismatch.
func storeMismatchError(m storeproof.Mismatch) error {
	return &StoreMismatchError{Service: m.Service, Holder: m.Holder, Theirs: m.Theirs,
		Ours: storeID{backend: m.Ours.Backend, ID: m.Ours.ID, Where: m.Ours.Where}}
}

// ErrNoTarget is returned by InjectPanic for a target the engine does not have.
var ErrNoTarget = errors.New("engine: no such actor")
