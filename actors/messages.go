package actors

// Every message the engine's actors exchange to play their roles lives in this file, so
// the cascades of docs/architecture.md can be read against one list: what the ownership
// broadcasts, what it takes, what the root asks of its members and what they answer.

import (
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/lease"
)

// Role commands. The root actor (and, for fencing, the ownership cascade) sends them to
// every role-obeying actor: each ServicePrimary, each TransferHost and the jobs host.
// Each is answered, to the sender, with the matching reply below.

// Serve tells an actor to start serving (subscribe, start jobs) under Epoch, the
// fencing token its shared backends adopt before it subscribes (docs/design.md §4.7). A member
// already serving that is told Serve with a higher epoch adopts it; the jobs host puts
// it in the ctx of the runs it starts (JobEpoch), and the transfer hosts ignore it.
// Shared says the epoch is a draining engine's, which the stores hold already
// (lease.Role.Shared); otherwise a backend must not join a store that holds it
// (epoch.Taken). Reply: Accepting.
type Serve struct {
	Epoch  uint64
	Shared bool
}

// StopAccepting tells an actor to end its shared subscriptions at the broker and to finish
// what it has already received, by Deadline at the latest. It replies Accepting{false}
// once the broker has confirmed the UNSUB, and Drained once nothing is left open.
type StopAccepting struct{ Deadline time.Time }

// Stop tells an actor to end everything at once: unsubscribe, cancel what runs, close what
// is open. Fencing and the drain deadline use it. Reply: Down.
type Stop struct{}

// ServeFailed answers Serve when From could not subscribe (or the broker did not
// confirm it); the root tells it Serve again after a pause.
type ServeFailed struct {
	From *actor.PID
	Err  error
}

// Accepting reports that From now takes (true) or no longer takes (false) new work.
type Accepting struct {
	From *actor.PID
	On   bool
}

// Drained reports that From has finished everything it had received.
type Drained struct{ From *actor.PID }

// Down reports that From has stopped everything.
type Down struct{ From *actor.PID }

// Role changes the ownership actor broadcasts to its subscribers.
type (
	// Serving: this engine holds the lease; serve under Epoch. Restored is true after
	// fencing.
	Serving struct {
		Revision uint64
		Restored bool
		Epoch    uint64
		Shared   bool // Epoch is a draining engine's (lease.Role.Shared)
	}
	// EpochChanged: this engine, serving, took a new epoch (a deferred bump, a lease
	// taken again); serve under it from now on.
	EpochChanged struct{ Epoch uint64 }
	// StandingBy: another rollout holds the lease; load, serve nothing, wait.
	StandingBy struct{ Holder lease.Holder }
	// Fenced: no renewal for lease/2; stop everything at once, keep renewing.
	Fenced struct{}
	// Lost: another engine holds the lease; stop at once, then shut down.
	Lost struct{ Holder lease.Holder }
	// Released: the lease was given up (or never held and the claim stopped).
	Released struct{}
	// ClaimFailed: the claim ended with an error (another engine serves, or the standby
	// timed out); the engine must not serve.
	ClaimFailed struct{ Err error }
	// StatusChanged: the ownership published Status (a state, a renewal's revision, a
	// hand-off target). A subscriber hears each change, before the role broadcast of
	// the same step, and the current status when it subscribes; the root publishes it
	// with its phase, so that one snapshot tells both.
	StatusChanged struct{ Status Status }
)

// Commands the ownership actor takes.
type (
	// Release starts a clean release of the lease.
	Release struct{}
	// Subscribe adds a receiver of the role broadcasts; it is sent the current role at once.
	Subscribe struct{ PID *actor.PID }
	// Unsubscribe removes a receiver of the role broadcasts: a root that stops, which
	// every later StatusChanged (one a renewal) would otherwise reach dead.
	Unsubscribe struct{ PID *actor.PID }
	// MarkDrained tells the ownership that the handover's drain is over: a release
	// that marked the epoch record draining marks it drained. Reply: DrainMarked, once
	// the mark is written (or there was none to write).
	MarkDrained struct{}
	// DrainMarked answers MarkDrained.
	DrainMarked struct{}
	// StoreAhead tells the ownership that a data store holds Epoch, newer than the
	// one the engine serves under, and so refuses to serve (lease.Machine.StoreAhead):
	// the lease's epoch record was lost, and the next bump goes past it.
	StoreAhead struct{ Epoch uint64 }
)

// Handover asks the root actor to hand the engine over: jobs stop, the lease is
// released, every member stops accepting and drains, then everything stops.
type Handover struct{}
