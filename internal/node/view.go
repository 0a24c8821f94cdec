package node

import (
	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/enginemetrics"
	"github.com/abi-engine/engine/lease"
)

// The engine's states as View names them: the lease's, and these two.
const (
	StateIdle   = "idle"
	StateClient = "client"
)

// View is where the engine stands, read once from what its actors publish: /status,
// the metrics, step-down, the watch of rivals and the epoch of a call's trace all read
// it, so "serving" has one definition (State).
type View struct {
	Up   bool        // Load has returned (an end that began after it keeps this)
	Role config.Role // effective: serve or client once loaded
	// State is where the engine stands: idle until Load has returned; then the
	// lease's state, except that a lease taken (at the claim, a takeover, a renewal
	// after fencing) shows as serving only once the root actor has confirmed that
	// every member serves, and as the state before it until then. A holder with a
	// member that failed to serve shows as serving (it holds the lease, and no other
	// engine serves); Failing names the member.
	State string
	// Lease is the ownership's status (as the root last heard it, once there is a
	// root); HasLease is false before the claim and after the teardown (and on a
	// client).
	Lease    actors.Status
	HasLease bool
	// Phase is the root's handover phase, of the same snapshot as Lease; HasRoot is
	// false until the root is spawned.
	Phase   actors.Phase
	HasRoot bool
	// Failing are the root's failing members while this engine holds the lease (none
	// otherwise: a standby's members are not told to serve).
	Failing []actors.MemberFailure
}

// Serving reports whether the engine serves (State).
func (v View) Serving() bool { return v.State == lease.StateServing.String() }

// Epoch is the epoch the engine serves under; 0 while it does not serve.
func (v View) Epoch() uint64 {
	if !v.Serving() {
		return 0
	}
	return v.Lease.Epoch
}

// CanHandOver reports whether a step-down may begin: the engine holds the lease and
// its root relays, no handover under way.
func (v View) CanHandOver() bool {
	return v.HasLease && v.HasRoot && v.Lease.State == lease.StateServing && v.Phase == actors.PhaseRelaying
}

// View reads where the engine stands now. Once the root actor exists, everything the
// view takes of the actors (the lease's status, the phase, the root's state and its
// failing members) is one snapshot the root published (actors.RootView), so the lease
// status and the phase are of one moment: the root's, which hears of a change of the
// lease in the ownership's StatusChanged, in order with the role broadcasts. Before the
// root exists (the claim, a standby's proof, a refused claim) the lease is the
// ownership's own status, read alone; after the teardown (and on a client, or before
// the claim) there is neither, and the state is idle (or client).
func (e *Engine) View() View {
	e.mu.Lock()
	role, own, root, up := e.role, e.ownership, e.root, e.upLocked()
	e.mu.Unlock()
	if role == "" {
		role = e.cfg.NATS.Engine.Role
	}
	v := View{Up: up, Role: role}
	var rootState lease.State
	switch {
	case root != nil: // its ownership exists as long as it does
		rv := root.View()
		v.Lease, v.HasLease = rv.Lease, true
		v.Phase, v.HasRoot, rootState = rv.Phase, true, rv.State
		if v.Lease.State == lease.StateServing {
			v.Failing = rv.Failing
		}
	case own != nil:
		v.Lease, v.HasLease = own.Status(), true
	}
	v.State = v.state(rootState)
	return v
}

// state is View.State of v, whose root (if any) relays rootState: the one definition
// of where the engine stands.
func (v View) state(rootState lease.State) string {
	switch {
	case !v.Up:
		return StateIdle
	case v.Role == config.RoleClient:
		return StateClient
	case !v.HasLease:
		return StateIdle
	case v.Lease.State != lease.StateServing:
		return v.Lease.State.String()
	case !v.HasRoot:
		return StateIdle
	case len(v.Failing) > 0:
		return lease.StateServing.String()
	}
	return rootState.String()
}

// Epoch is the epoch the engine serves under (View.Epoch).
func (e *Engine) Epoch() uint64 { return e.View().Epoch() }

// Backend is one backend's health, for /status.
type Backend struct {
	Service, Adapter string
	Down             error // why it is down; nil while it answers
}

// Backends are the serving (or standby) engine's backends with their health; none on
// a client.
func (e *Engine) Backends() []Backend {
	e.mu.Lock()
	set := e.serving
	e.mu.Unlock()
	if set == nil {
		return nil
	}
	bs := make([]Backend, 0, len(set.health))
	for _, h := range set.health {
		bs = append(bs, Backend{Service: h.Service(), Adapter: h.Adapter(), Down: h.Down()})
	}
	return bs
}

// DiscoveryInstances counts the module registry's live instances as this engine last
// read or wrote it; 0 when it hosts no registry.
func (e *Engine) DiscoveryInstances() int {
	e.mu.Lock()
	set := e.serving
	e.mu.Unlock()
	if set == nil || set.discovery == nil {
		return 0
	}
	return set.discovery.Service().LiveInstances()
}

// ActorPanics counts the actor panics recovered since the engine started.
func (e *Engine) ActorPanics() uint64 { return e.metrics.PanicCount.Load() }

// DeniedSubjects are the subjects the broker refused this engine a subscription or a
// publish on.
func (e *Engine) DeniedSubjects() []string { return e.metrics.NATS.DeniedSubjects() }

// EndCounts is what the end stopped and released (lifecycle.go), for the tests that
// show nothing is stopped or released twice.
func (e *Engine) EndCounts() map[string]int32 {
	return map[string]int32{
		"endings":       e.counts.endings.Load(),
		"member stops":  e.counts.memberStops.Load(),
		"releases":      e.counts.releases.Load(),
		"member closes": e.counts.membersClose.Load(),
	}
}

// scrape is what a scrape of the metrics reads of the view.
func (e *Engine) scrape() enginemetrics.Scrape {
	v := e.View()
	return enginemetrics.Scrape{State: v.State, Revision: v.Lease.Revision, Epoch: v.Lease.Epoch}
}
