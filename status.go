package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
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
func (e *Engine) State() State {
	e.mu.Lock()
	role, own, root, up := e.role, e.ownership, e.root, e.upLocked()
	e.mu.Unlock()
	switch {
	case !up:
		return StateIdle
	case role == config.RoleClient:
		return StateClient
	case own == nil:
		return StateIdle
	}
	s := own.Status().State
	if s != lease.StateServing {
		return State(s.String())
	}
	if root == nil {
		return StateIdle
	}
	if len(root.Failing()) > 0 {
		return StateServing
	}
	return State(root.State().String())
}

func (e *Engine) status() Status {
	s := Status{
		InstanceID:  e.InstanceID(),
		Role:        string(e.Role()),
		State:       e.State(),
		RolloutID:   e.cfg.NATS.Engine.RolloutID,
		Version:     e.opts.version,
		ActorPanics: e.metrics.panicCount.Load(),
	}
	e.mu.Lock()
	own, set, root := e.ownership, e.serving, e.root
	e.mu.Unlock()
	if root != nil {
		for _, f := range e.failingMembers(root) {
			s.Failing = append(s.Failing, MemberStatus{Member: f.Member, Error: f.Err.Error(), Since: f.Since})
		}
	}
	s.Backends = []BackendStatus{}
	if set != nil {
		for _, h := range set.health {
			b := BackendStatus{Service: h.Service(), Backend: h.Adapter(), Up: true}
			if err := h.Down(); err != nil {
				b.Up, b.Error = false, err.Error()
			}
			s.Backends = append(s.Backends, b)
		}
	}
	if d := e.cfg.NATS.Discovery; d != nil {
		s.Discovery = &DiscoveryStatus{Project: d.Project}
		if set != nil && set.discovery != nil {
			s.Discovery.Instances = set.discovery.Service().LiveInstances()
		}
	}
	if own != nil {
		os := own.Status()
		s.Lease.Revision, s.Lease.Epoch = os.Revision, os.Epoch
		if os.Holder.Known() || os.Holder != (lease.Holder{}) {
			h := os.Holder
			s.Lease.Holder = &h
		}
	}
	if err := e.Readiness(); err != nil {
		s.NotReady = err.Error()
	}
	return s
}

// Epoch is the epoch the engine serves under (docs/design.md §4.7, docs/architecture.md
// "Epoch"): the fencing token that changes only when ownership changes, which every
// shared backend checks at the commit of each write. An embedder's own services pass it
// to their stores the same way. It is 0 while the engine does not serve.
func (e *Engine) Epoch() uint64 {
	if e.State() != StateServing {
		return 0
	}
	e.mu.Lock()
	own := e.ownership
	e.mu.Unlock()
	if own == nil {
		return 0
	}
	return own.Status().Epoch
}

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
func (e *Engine) Readiness() error {
	e.mu.Lock()
	up, set, root, own := e.upLocked(), e.serving, e.root, e.ownership
	e.mu.Unlock()
	if !up {
		return errLoading
	}
	switch st := e.State(); st {
	case StateServing:
		if failing := e.failingMembers(root); len(failing) > 0 {
			return fmt.Errorf("engine: serving, but %w", membersDown(failing))
		}
		if set != nil {
			if down := set.backendsDown(); len(down) > 0 {
				return fmt.Errorf("engine: serving, but %w", errors.Join(down...))
			}
		}
		if denied := e.metrics.nats.DeniedSubjects(); len(denied) > 0 {
			return fmt.Errorf("engine: serving, but %w: %s", ErrPermissionDenied, strings.Join(denied, ", "))
		}
		if own != nil {
			if err := own.Status().Tampered; err != nil {
				return fmt.Errorf("engine: serving, but %w", err)
			}
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

// failingMembers are root's failing members while this engine holds the lease (none
// otherwise: a standby's members are not told to serve).
func (e *Engine) failingMembers(root interface{ Failing() []actors.MemberFailure }) []actors.MemberFailure {
	e.mu.Lock()
	own := e.ownership
	e.mu.Unlock()
	if root == nil || own == nil || own.Status().State != lease.StateServing {
		return nil
	}
	return root.Failing()
}

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
	e.mu.Lock()
	own, root := e.ownership, e.root
	e.mu.Unlock()
	if own == nil {
		return nil
	}
	s := own.Status()
	lp := e.cfg.NATS.Engine.Lease()
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
		if failing := e.failingMembers(root); len(failing) > 0 && time.Since(failing[0].Since) > lp {
			return fmt.Errorf("%w for longer than the lease (%s): %w", errStuckMember, lp, membersDown(failing))
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
