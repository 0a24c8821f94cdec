package actors

import (
	"time"

	"github.com/anthdm/hollywood/actor"
)

// Role commands. The root actor (and, for fencing, the ownership cascade) sends them to
// every role-obeying actor: each ServicePrimary, each TransferHost and the jobs host.
// Each is answered, to the sender, with the matching reply below.

// Serve tells an actor to start serving (subscribe, start jobs). Reply: Accepting.
type Serve struct{}

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
