package lease

import (
	"fmt"
	"time"
)

// Output is everything one step asks of the driver, to be carried out in this order:
// log and count the events, run the call, turn the watches on or off, arm the timers at
// the deadlines, move the gate, then broadcast the role change and the epoch change.
// The zero value of each field asks nothing.
type Output struct {
	Moves  []Move // the sub-states the step went through, for a debug log
	Events []Event
	Op     *Op // run it now; nil: nothing to run
	Watch  WatchMove
	// EpochWatch turns the watch of the epoch record on or off; while on, the driver
	// reports every record it sees with ObserveEpoch.
	EpochWatch WatchMove
	// Deadlines are when Tick is next needed (all of them, after this step); arm the
	// timers at them.
	Deadlines Deadlines
	Gate      GateMove
	Role      Role // the role change to broadcast; RoleNone: none
	// EpochChanged is the epoch the engine now serves under when it changed while
	// serving (a deferred bump, a lease taken again): broadcast it. 0: no change.
	EpochChanged uint64
}

// Move is one transition: a row of the table above Machine.
type Move struct {
	From, To SubState
	Input    Input
}

func (m Move) String() string { return fmt.Sprintf("%s -%s-> %s", m.From, m.Input, m.To) }

// WatchMove turns the watch of the lease on or off.
type WatchMove uint8

const (
	WatchKeep WatchMove = iota // leave the watch as it is
	WatchOn                    // watch the lease and report every record with Observe
	WatchOff                   // stop watching
)

func (w WatchMove) String() string {
	switch w {
	case WatchKeep:
		return "keep"
	case WatchOn:
		return "on"
	case WatchOff:
		return "off"
	}
	return fmt.Sprintf("WatchMove(%d)", uint8(w))
}

// GateKind is how the driver moves the Gate.
type GateKind uint8

const (
	GateKeep  GateKind = iota // leave it as it is
	GateAllow                 // Gate.Allow(Until): serving
	GateDrain                 // Gate.Drain: released while serving; the calls received are answered
	GateClose                 // Gate.Close: not serving
)

// GateMove is a move of the Gate.
type GateMove struct {
	Kind  GateKind
	Until time.Time // GateAllow: lease/2 after the last successful renewal was sent
}

func (g GateMove) String() string {
	switch g.Kind {
	case GateKeep:
		return "keep"
	case GateAllow:
		return "allow until " + g.Until.String()
	case GateDrain:
		return "drain"
	case GateClose:
		return "close"
	}
	return fmt.Sprintf("GateKind(%d)", uint8(g.Kind))
}

// RoleKind is a role change the driver broadcasts to whoever serves under the lease.
type RoleKind uint8

const (
	RoleNone        RoleKind = iota
	RoleServing              // serve: the lease is ours (Restored: again, after a fence)
	RoleStandingBy           // another rollout holds it (Holder): load, serve nothing
	RoleFenced               // stop everything at once; the lease may still be ours
	RoleLost                 // another engine holds it (Holder): stop at once, then end
	RoleReleased             // the lease was given up (or never held)
	RoleClaimFailed          // the claim ended with Err: never serve
)

var roleNames = [...]string{RoleNone: "none", RoleServing: "serving", RoleStandingBy: "standing_by",
	RoleFenced: "fenced", RoleLost: "lost", RoleReleased: "released", RoleClaimFailed: "claim_failed"}

func (k RoleKind) String() string {
	if int(k) < len(roleNames) {
		return roleNames[k]
	}
	return fmt.Sprintf("RoleKind(%d)", uint8(k))
}

// Role is a role change with what its receivers need.
type Role struct {
	Kind     RoleKind
	Revision uint64 // serving: our revision
	Epoch    uint64 // serving: the epoch it serves under
	Restored bool   // serving: after a fence
	// Shared (serving) says Epoch is a draining engine's, deferred to (a clean
	// handover): the stores hold it already, and joining them is right. Otherwise the
	// epoch was taken as new, and a store that holds it was written by another engine.
	Shared bool
	Holder Holder // standing by, lost: the other engine
	Err    error  // claim failed: *AlreadyServingError or *StandbyTimeoutError
}

// Deadlines are the times at which Tick has something to do; zero fields: none.
type Deadlines struct {
	Renew    time.Time // next renewal
	Fence    time.Time // fencing, while serving
	Takeover time.Time // one silent lease period after the revision seen
	Standby  time.Time // standby timeout
	Retry    time.Time // retry a claim read that failed
	Epoch    time.Time // serving: the deferred epoch bump, or a settle to try again
}

// Next is the earliest non-zero deadline, or zero.
func (d Deadlines) Next() time.Time {
	var next time.Time
	for _, t := range []time.Time{d.Renew, d.Fence, d.Takeover, d.Standby, d.Retry, d.Epoch} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}
