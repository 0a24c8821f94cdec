// Package actors is the hollywood side of abi-engine: the role messages every serving
// actor obeys, the recover middleware every actor runs under, the ownership actor with
// its children, which drive the pure lease.Machine, and the root actor, which drives
// the pure HandoverMachine (the relay of role changes to the members and the handover
// cascade) and reads the ownership only through its role broadcasts.
//
// The ownership tree:
//
//	ownership            drives lease.Machine; runs claim and release calls on its worker;
//	│                    broadcasts role changes (Serving, StandingBy, Fenced, Lost,
//	│                    Released, ClaimFailed) and EpochChanged to its subscribers
//	├── renewer          renewal timer (lease/4) and the renewal calls, each cut off after lease/4
//	├── fencer           fence timer: lease/2 after the last successful renewal was sent
//	└── contender        the watch of the lease key (and of the epoch key while a bump is
//	                     deferred), the takeover, standby and epoch timers
//
// The ownership actor only carries out what each step of the machine returns
// (lease.Output: the store call, the watch, the timers, the gate, the role to
// broadcast); it never compares states. No actor blocks in Receive: store calls and the
// watch run in goroutines the actor starts, cancels when it stops or restarts, and that
// report back by message; Ownership.Stop waits for them, bounded by its context.
// The machine, the store and the status live in a struct the spawner owns, so an actor
// that is killed (a panic, recovered by Recover and turned into an in-place restart)
// picks them up again and the lease is kept.
//
// The member role protocol is here once, for every member that obeys the role messages
// (the primaries, the transfer hosts, the discovery member, the jobs host): where a
// role stands (RolePhase), a command as a member takes it from an actor or from one of
// its methods (RoleCommand, RoleAsk, TakeRole) and the reply it owes (Answer,
// RoleReply), the queue that begins the commands one step at a time (RoleQueue), the
// step goroutine that reports to the member's actor by message and keeps its result
// (StartStep, RoleStep, on a Group the member owns), and a method's wait for its
// answer or the end of the actor instance (AskRole, AwaitRole). A member supplies only
// its steps: what to subscribe, how to stop accepting, drain and stop.
package actors
