package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/node"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// This file is what an embedder's own service is to the engine: the same primary as a
// kernel service (per-call lease check, bounded concurrency, metrics, handover and
// fencing), where its data lives, a transfer host of its own, the epoch of the call and
// its errors mapped to the protocol's codes.

// Service is an embedder's own service, served next to the kernel ones (WithService).
// It gets everything a kernel service gets: a ServicePrimary on
// abi.svc.<Name>.v1.<operation> that checks the lease before every call, counts it in
// abi_engine_requests_total and abi_engine_request_duration_seconds, drains in a
// handover and stops at a fence; a transfer host of its own for payloads larger than
// one message; the epoch its writes carry (CallEpoch, Fence); and its errors answered
// with the protocol's codes (Errors).
type Service struct {
	// Name is the service's wire name: the micro service name and the <service> of
	// abi.svc.<service>.v1.<operation>; a single subject token.
	Name string
	// Description is shown by `nats micro info`.
	Description string
	// Operations maps each operation to what runs it (primaries.Handle makes one of a
	// typed function). At least one.
	Operations map[string]primaries.Operation
	// Data says where the service keeps its data: SharedData (every engine reaches the
	// same data, so a rollout hands over without downtime) or LocalData (it stays on
	// this host). Required: an engine with a rollout id refuses, at New, a service whose
	// data is local, as it refuses a local kernel backend.
	Data Data
	// Transfers, optional, are the service's transfer operations, served by a
	// sessions.TransferHost of the service's own on protocol.TransferPrefix(Name)
	// (owner-scoped subjects; sessions open at a handover finish on this engine while
	// new ones open on the next). Clients reach them with client.Service's Upload and
	// Download.
	Transfers map[string]sessions.Handler
	// Fence, optional, is the service's shared store as it takes the epoch: the serve
	// step adopts the engine's epoch in it before the service subscribes, as it does in
	// the kernel's shared backends (docs/architecture.md "Epoch"), and a store at a
	// newer epoch keeps a stale engine from serving the service at all.
	Fence primaries.EpochFence
	// Errors maps the service's own errors to the protocol's codes for every operation
	// and transfer (ErrorCodes.Map); unmatched errors are INTERNAL.
	Errors ErrorCodes
}

// Data is where a service keeps its data (Service.Data). The zero value declares
// nothing and is refused.
type Data struct {
	kind  dataKind
	where string
}

type dataKind int

const (
	dataUndeclared dataKind = iota
	dataShared
	dataLocal
)

// SharedData declares data every engine of the account reaches (a shared database, a
// JetStream bucket on a shared broker): a rollout may hand the service over.
func SharedData() Data { return Data{kind: dataShared} }

// LocalData declares data that stays on this host; where says where ("file at
// /var/lib/app/db", "this process"), and is how the refusal of a rollout names it.
func LocalData(where string) Data { return Data{kind: dataLocal, where: where} }

// Local reports whether the data stays on this host, and where.
func (d Data) Local() (where string, ok bool) { return d.where, d.kind == dataLocal }

// String says where the data is, as the refusal of a rollout does.
func (d Data) String() string {
	switch d.kind {
	case dataShared:
		return "shared"
	case dataLocal:
		return "local: " + d.where
	}
	return "undeclared"
}

// ErrorCode maps the errors matching Target (errors.Is) to Code.
type ErrorCode struct {
	Target error
	Code   protocol.Code
}

// ErrorCodes maps an embedder's errors to the protocol's codes; the first match wins.
type ErrorCodes []ErrorCode

// Map is the one helper that turns an error of the embedder's code into the error the
// caller receives: nil stays nil; a *protocol.Error, and a context error (the engine
// maps those itself: a stopped or timed-out call), is returned as it is; an error
// matching a Target becomes a *protocol.Error of its Code with the error's message,
// never retryable (only the engine knows that nothing ran); anything else is returned
// as it is, which the engine answers INTERNAL.
func (m ErrorCodes) Map(err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	for _, c := range m {
		if errors.Is(err, c.Target) {
			return protocol.Errorf(c.Code, "%v", err)
		}
	}
	return err
}

// epochKey carries the epoch of a call in its context.
type epochKey struct{}

// CallEpoch is the epoch the engine serves the call of ctx under (docs/design.md §4.7): the one
// the service's primary adopted before it subscribed the run that received the call,
// which is what the service's own writes to a shared store must carry so that the
// store can refuse a stale engine's write. Calls answered during a handover's drain
// carry the old engine's epoch, as kernel writes do. In a job's run it is the epoch the
// engine served under when it started the run: a run that ignores its cancel after a
// fence writes under it, and a store that checks it refuses those writes once another
// engine has taken the lease over. ok is false outside an embedder's operation,
// transfer or job.
func CallEpoch(ctx context.Context) (epoch uint64, ok bool) {
	if v, ok := ctx.Value(epochKey{}).(uint64); ok {
		return v, true
	}
	return actors.JobEpoch(ctx)
}

// nodeServices are the embedder's services as the engine's wiring builds them: each
// operation and transfer handler carries the call's epoch (CallEpoch) and maps its
// errors.
func nodeServices(services []Service) []node.Service {
	out := make([]node.Service, len(services))
	for i, s := range services {
		out[i] = node.Service{Name: s.Name, Fence: s.Fence, Primary: s.primary}
		if len(s.Transfers) > 0 {
			out[i].Transfers = s.transfers
		}
	}
	return out
}

// primary is the primaries.Service of s: every operation carries the call's epoch and
// maps its errors.
func (s Service) primary(epoch func() uint64) primaries.Service {
	ops := make(map[string]primaries.Operation, len(s.Operations))
	for name, op := range s.Operations {
		ops[name] = func(ctx context.Context, data []byte) ([]byte, error) {
			out, err := op(context.WithValue(ctx, epochKey{}, epoch()), data)
			if err != nil {
				return nil, s.Errors.Map(err)
			}
			return out, nil
		}
	}
	return primaries.Service{Name: s.Name, Description: s.Description, Operations: ops}
}

// transfers are s's transfer handlers, carrying the epoch and mapping errors like its
// operations.
func (s Service) transfers(epoch func() uint64) map[string]sessions.Handler {
	hs := make(map[string]sessions.Handler, len(s.Transfers))
	for name, h := range s.Transfers {
		hs[name] = func(ctx context.Context, req sessions.TransferRequest) ([]byte, error) {
			out, err := h(context.WithValue(ctx, epochKey{}, epoch()), req)
			if err != nil {
				return nil, s.Errors.Map(err)
			}
			return out, nil
		}
	}
	return hs
}

// validate names what is wrong with s, as WithService reports it.
func (s Service) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("engine: WithService(%q): %s", s.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case !token(s.Name):
		return bad("the name must be a single subject token (no '.', '*', '>' or white space) and not empty")
	case s.Name == protocol.KeyValue || s.Name == protocol.ObjectStorage:
		return bad("%s is a kernel service's name", s.Name)
	case len(s.Operations) == 0:
		return bad("Operations is empty; a service needs at least one")
	case s.Data.kind == dataUndeclared:
		return bad("Data is not set; declare where the service keeps its data: engine.SharedData() or engine.LocalData(where)")
	case s.Data.kind == dataLocal && s.Data.where == "":
		return bad("LocalData needs a description of where the data is (\"file at ...\")")
	}
	for name, op := range s.Operations {
		if !token(name) {
			return bad("operation %q is not a single subject token", name)
		}
		if op == nil {
			return bad("operation %q is nil", name)
		}
	}
	for name, h := range s.Transfers {
		if !token(name) {
			return bad("transfer %q is not a single subject token", name)
		}
		if h == nil {
			return bad("transfer %q has a nil handler", name)
		}
	}
	for i, c := range s.Errors {
		if c.Target == nil {
			return bad("Errors[%d] has a nil Target", i)
		}
		if !c.Code.Valid() {
			return bad("Errors[%d] maps to %q, which is not a protocol code (one of %v)", i, c.Code, protocol.Codes)
		}
	}
	return nil
}

// token reports whether s is a single NATS subject token.
func token(s string) bool { return s != "" && !strings.ContainsAny(s, ". *>\t\r\n") }

// localServices refuses, like config.CheckSharedBackends refuses a local kernel
// backend, a serving engine with a rollout id whose embedder services keep their data
// on this host: New runs it, so a refused engine has touched nothing.
func localServices(cfg *config.Config, services []Service) error {
	e := cfg.NATS.Engine
	if e.Role != config.RoleServe || e.RolloutID == "" {
		return nil
	}
	var local []config.LocalBackend
	for _, s := range services {
		if where, ok := s.Data.Local(); ok {
			local = append(local, config.LocalBackend{Service: s.Name, Where: where})
		}
	}
	if len(local) == 0 {
		return nil
	}
	return &config.LocalBackendsError{RolloutID: e.RolloutID, Local: local}
}
