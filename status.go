package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/node"
	"github.com/abi-engine/engine/lease"
)

// State is where the engine stands: the lease states, or "client".
type State string

// The states of docs/design.md §4.5.
const (
	StateIdle     State = "idle"
	StateStandby  State = "standby"
	StateServing  State = "serving"
	StateFenced   State = "fenced"
	StateLost     State = "lost"
	StateReleased State = "released"
	StateClient   State = "client"
)

// Status is the body of GET /status (docs/design.md §4.5).
type Status struct {
	InstanceID string      `json:"instance_id"`
	Role       string      `json:"role"`
	State      State       `json:"state"`
	RolloutID  string      `json:"rollout_id"`
	Version    string      `json:"version"`
	Lease      LeaseStatus `json:"lease"`
	// Backends are the serving (or standby) engine's backends, each with whether it
	// answers; empty on a client.
	Backends []BackendStatus `json:"backends"`
	// Failing are the members of a holder that could not serve what they were told,
	// each with why; empty while every member serves (or none was told to).
	Failing []MemberStatus `json:"failing,omitempty"`
	// ActorPanics counts the actor panics recovered since the engine started.
	ActorPanics uint64 `json:"actor_panics"`
	// NotReady says why /readyz answers 503; empty when it answers 200.
	NotReady string `json:"not_ready,omitempty"`
	// Discovery is the module registry this engine hosts while it serves; nil when
	// nats.discovery is off.
	Discovery *DiscoveryStatus `json:"discovery,omitempty"`
}

// DiscoveryStatus is the module registry in GET /status (docs/discovery.md).
type DiscoveryStatus struct {
	Project string `json:"project"`
	// Instances counts the registry's live instances as this engine last read or wrote
	// it, the metric abi_engine_discovery_instances: 0 on an engine that does not serve
	// it (a standby) or has not read it yet.
	Instances int `json:"instances"`
}

// BackendStatus is one backend in GET /status.
type BackendStatus struct {
	Service string `json:"service"`
	Backend string `json:"backend"` // the adapter
	Up      bool   `json:"up"`
	Error   string `json:"error,omitempty"` // why it is down
}

// MemberStatus is a member (a service's primary, a transfer host, the jobs host) of a
// holder that could not serve, in GET /status.
type MemberStatus struct {
	Member string    `json:"member"` // its actor: "primary/keyvalue"
	Error  string    `json:"error"`  // why its last serve failed
	Since  time.Time `json:"since"`  // since when it has been failing
}

// LeaseStatus is the lease as this engine knows it.
type LeaseStatus struct {
	Revision uint64 `json:"revision"`
	// Epoch is the epoch this engine holds while the lease is its own (docs/design.md §4.7);
	// while it serves, the one it serves under. 0 when it holds none.
	Epoch  uint64        `json:"epoch"`
	Holder *lease.Holder `json:"holder"` // null when free or unknown to this engine
}

// State is where the engine stands, as /status, /readyz and the metrics say it: idle
// until Load has returned; then the lease's state, except that a lease taken (at the
// claim, a takeover, a renewal after fencing) shows as serving only once the root actor
// has confirmed that every member serves, and as the state before it until then. A
// holder with a member that failed to serve shows as serving (it holds the lease, and
// no other engine serves), and Readiness names the member.
func (e *Engine) State() State { return State(e.n.View().State) }

// status is GET /status's body, from one view of where the engine stands.
func (e *Engine) status() Status {
	v := e.n.View()
	s := Status{
		InstanceID:  e.InstanceID(),
		Role:        string(v.Role),
		State:       State(v.State),
		RolloutID:   e.n.Config().NATS.Engine.RolloutID,
		Version:     e.n.Version(),
		ActorPanics: e.n.ActorPanics(),
	}
	for _, f := range v.Failing {
		s.Failing = append(s.Failing, MemberStatus{Member: f.Member, Error: f.Err.Error(), Since: f.Since})
	}
	s.Backends = []BackendStatus{}
	for _, h := range e.n.Backends() {
		b := BackendStatus{Service: h.Service, Backend: h.Adapter, Up: true}
		if h.Down != nil {
			b.Up, b.Error = false, h.Down.Error()
		}
		s.Backends = append(s.Backends, b)
	}
	if d := e.n.Config().NATS.Discovery; d != nil {
		s.Discovery = &DiscoveryStatus{Project: d.Project, Instances: e.n.DiscoveryInstances()}
	}
	if v.HasLease {
		os := v.Lease
		s.Lease.Revision, s.Lease.Epoch = os.Revision, os.Epoch
		if os.Holder.Known() || os.Holder != (lease.Holder{}) {
			h := os.Holder
			s.Lease.Holder = &h
		}
	}
	if err := e.readiness(v); err != nil {
		s.NotReady = err.Error()
	}
	return s
}

// Epoch is the epoch the engine serves under (docs/design.md §4.7, docs/architecture.md
// "Epoch"): the fencing token that changes only when ownership changes, which every
// shared backend checks at the commit of each write. An embedder's own services pass it
// to their stores the same way. It is 0 while the engine does not serve.
func (e *Engine) Epoch() uint64 { return e.n.Epoch() }

// Status is the engine's status for GET /status.
func (e *Engine) Status() any { return e.status() }

// Ready reports whether Load has returned and the engine is serving with every backend
// answering, standing by, or a client: a standby counts as ready so that a rolling
// update proceeds.
func (e *Engine) Ready() bool { return e.Readiness() == nil }

// ErrPermissionDenied is the readiness of a serving engine the broker refused a
// subscription or a publish it needs: calls on those subjects go unanswered, so it is
// not ready until it is restarted with the permissions docs/security.md lists.
var ErrPermissionDenied = errors.New("the NATS broker refused permissions this engine needs (docs/security.md) on")

// errLoading is the readiness of an engine whose Load has not returned.
var errLoading = errors.New("engine: loading")

// Readiness is nil when the engine is ready (see Ready), else why not: the state it is
// in, the backends that are down (docs/design.md §4.5), or a data store found ahead of the
// lease's intact epoch record (*lease.StoreAheadError: repaired, but written by
// something other than an engine), for as long as this engine holds the lease.
func (e *Engine) Readiness() error { return e.readiness(e.n.View()) }

// readiness is Readiness of the view v.
func (e *Engine) readiness(v node.View) error {
	if !v.Up {
		return errLoading
	}
	switch st := State(v.State); st {
	case StateServing:
		if len(v.Failing) > 0 {
			return fmt.Errorf("engine: serving, but %w", membersDown(v.Failing))
		}
		var down []error
		for _, b := range e.n.Backends() {
			if b.Down != nil {
				down = append(down, b.Down)
			}
		}
		if len(down) > 0 {
			return fmt.Errorf("engine: serving, but %w", errors.Join(down...))
		}
		if denied := e.n.DeniedSubjects(); len(denied) > 0 {
			return fmt.Errorf("engine: serving, but %w: %s", ErrPermissionDenied, strings.Join(denied, ", "))
		}
		if v.HasLease && v.Lease.Tampered != nil {
			return fmt.Errorf("engine: serving, but %w", v.Lease.Tampered)
		}
		return nil
	case StateStandby, StateClient:
		return nil
	default:
		return fmt.Errorf("engine: %s", st)
	}
}

// ErrMemberCannotServe is the readiness of a holder with a member that was told to
// serve and could not (a store that refuses the epoch, a bucket refused for its
// settings, a subscription refused): that service's calls go unanswered. Once it has
// lasted a lease period the engine is not healthy either.
var ErrMemberCannotServe = errors.New("a member cannot serve")

// membersDown names each failing member, why and since when; it matches
// ErrMemberCannotServe.
func membersDown(failing []actors.MemberFailure) error {
	parts := make([]string, len(failing))
	for i, f := range failing {
		parts[i] = fmt.Sprintf("%s (for %s): %v", f.Member, time.Since(f.Since).Round(time.Millisecond), f.Err)
	}
	return fmt.Errorf("%w: %s", ErrMemberCannotServe, strings.Join(parts, "; "))
}

// errWedged is the health error of a holder that believes it serves but has not
// renewed for more than a lease period.
var errWedged = errors.New("engine: wedged")

// errStuckFenced is the health error of a holder fenced for longer than a lease
// period: it cannot renew (a deleted bucket it cannot recreate, JetStream gone from the
// account) and a restart is the cure a liveness probe can bring.
var errStuckFenced = errors.New("engine: fenced without recovering")

// errStuckMember is the health error of a holder with a member that has failed to
// serve for longer than a lease period.
var errStuckMember = errors.New("engine: holding the lease")

// Healthy is nil while the process is healthy, and an error when the engine believes
// it serves but has not renewed for more than a lease period (a wedged holder), holds
// the lease with a member that has failed to serve for more than a lease period, or
// has been fenced for longer than a lease period without renewing again.
func (e *Engine) Healthy() error {
	v := e.n.View()
	if !v.HasLease {
		return nil
	}
	s := v.Lease
	lp := e.n.Config().NATS.Engine.Lease()
	since := time.Since(s.LastRenewed)
	switch s.State {
	case lease.StateServing:
		if since > lp {
			return fmt.Errorf("%w: serving but no lease renewal for %s (lease %s)", errWedged,
				since.Round(time.Millisecond), lp)
		}
		// A member that cannot serve for a lease period is as stuck as a fence that
		// lasts one: a restart is what a liveness probe can bring (and a rollout that
		// waits for readiness does not go on meanwhile).
		if len(v.Failing) > 0 && time.Since(v.Failing[0].Since) > lp {
			return fmt.Errorf("%w for longer than the lease (%s): %w", errStuckMember, lp, membersDown(v.Failing))
		}
	case lease.StateFenced:
		// It fenced lease/2 after its last successful renewal.
		if fenced := since - lp/2; fenced > lp {
			return fmt.Errorf("%w: fenced for %s, no lease renewal for %s (lease %s)", errStuckFenced,
				fenced.Round(time.Millisecond), since.Round(time.Millisecond), lp)
		}
	}
	return nil
}
