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
package actors
