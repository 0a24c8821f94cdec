package actors

// The member role protocol's one vocabulary: where a member's role stands, a role
// command as a member takes it (from an actor or from one of its methods), and the
// reply each command owes. Every member (a primary, a transfer host, the jobs host)
// plays its role with these; it supplies only its steps.

import (
	"context"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
)

// RolePhase is where a member's role stands.
type RolePhase int

// The phases of a member's role; docs/architecture.md has the table of how the role
// commands move a member between them.
const (
	RoleIdle              RolePhase = iota + 1 // serves nothing, no step under way
	RoleSubscribing                            // Serve: subscribing, confirming at the broker
	RoleServing                                // takes new work
	RoleStoppingAccepting                      // StopAccepting: ending the subscriptions, confirming the UNSUB
	RoleDraining                               // takes no new work; what it received is still answered
	RoleStopping                               // Stop (or Close): ending everything, confirming
	RoleStopped                                // Stop is done; Serve may start again
	RoleClosed                                 // Close: stopped for good
)

func (ph RolePhase) String() string {
	switch ph {
	case RoleIdle:
		return "idle"
	case RoleSubscribing:
		return "subscribing"
	case RoleServing:
		return "serving"
	case RoleStoppingAccepting:
		return "stopping-accepting"
	case RoleDraining:
		return "draining"
	case RoleStopping:
		return "stopping"
	case RoleStopped:
		return "stopped"
	case RoleClosed:
		return "closed"
	}
	return fmt.Sprintf("phase(%d)", int(ph))
}

// CloseRole is the command of a member's Close method: Stop, for good (Serve is refused
// from then on). Only a member's own methods send it, inside a RoleAsk.
type CloseRole struct{}

// RoleAsk is a role command from a method of a member (Serve, StopAccepting, Stop,
// Close) rather than from an actor: the same command as the role message (Msg is a
// Serve, StopAccepting, Stop or CloseRole), answered on Reply instead of by message.
type RoleAsk struct {
	Msg any
	// Ctx bounds the command's step; the caller's.
	Ctx context.Context
	// Reply takes the answer; buffered (one value), so the actor never waits for the
	// caller.
	Reply chan error
}

// RoleCommand is a role command a member has taken and not yet answered.
type RoleCommand struct {
	// Msg is Serve, StopAccepting, Stop or CloseRole.
	Msg any
	// From is the role message's sender, answered by message; nil for a method's.
	From *actor.PID
	// Reply is a method's answer (buffered, one value); nil for a role message.
	Reply chan<- error
	// Ctx is a method's bound on the command's step; nil for a role message.
	Ctx context.Context
}

// TakeRole makes the role command of a message: a role message from sender, or a
// method's RoleAsk. ok is false for any other message.
func TakeRole(msg any, sender *actor.PID) (cmd *RoleCommand, ok bool) {
	switch m := msg.(type) {
	case Serve, StopAccepting, Stop:
		return &RoleCommand{Msg: m, From: sender}, true
	case RoleAsk:
		return &RoleCommand{Msg: m.Msg, Reply: m.Reply, Ctx: m.Ctx}, true
	}
	return nil, false
}

// Stops reports whether the command is a Stop or a Close.
func (cmd *RoleCommand) Stops() bool {
	switch cmd.Msg.(type) {
	case Stop, CloseRole:
		return true
	}
	return false
}

// Closes reports whether the command is a Close.
func (cmd *RoleCommand) Closes() bool {
	_, ok := cmd.Msg.(CloseRole)
	return ok
}

// Deadline is a StopAccepting's drain deadline; zero for any other command.
func (cmd *RoleCommand) Deadline() time.Time {
	sa, _ := cmd.Msg.(StopAccepting)
	return sa.Deadline
}

// Name names the command for an error message.
func (cmd *RoleCommand) Name() string {
	switch cmd.Msg.(type) {
	case Serve:
		return "serve"
	case StopAccepting:
		return "stop accepting"
	case Stop:
		return "stop"
	case CloseRole:
		return "close"
	}
	return fmt.Sprintf("role command %T", cmd.Msg)
}

// Sender sends a message; *actor.Context and *actor.Engine are both one.
type Sender interface {
	Send(pid *actor.PID, msg any)
}

// Answer tells cmd's sender how the command ended: a method on its Reply (once; a
// command handled again after a crash is not answered twice), an actor with the role
// reply (RoleReply). A Close has no role reply.
func (cmd *RoleCommand) Answer(s Sender, self *actor.PID, err error) {
	if cmd.Reply != nil {
		select {
		case cmd.Reply <- err:
		default: // answered already
		}
		cmd.Reply = nil
	}
	if cmd.From == nil {
		return
	}
	if reply := RoleReply(cmd.Msg, self, err); reply != nil {
		s.Send(cmd.From, reply)
	}
}

// RoleReply is the reply a member From owes for role message msg ended with err:
// Serve's Accepting{On: true} (ServeFailed on an error), StopAccepting's
// Accepting{On: false}, Stop's Down. Drained, which a StopAccepting owes once
// everything received is answered, is the member's to send.
func RoleReply(msg any, from *actor.PID, err error) any {
	switch msg.(type) {
	case Serve:
		if err != nil {
			return ServeFailed{From: from, Err: err}
		}
		return Accepting{From: from, On: true}
	case StopAccepting:
		return Accepting{From: from, On: false}
	case Stop:
		return Down{From: from}
	}
	return nil
}
