// Package lease is the ownership lease that makes exactly one engine serve per NATS
// account: the holder record, the epoch record beside it (the fencing token every shared
// backend checks), the Store port that keeps both (a JetStream Store in
// lease/jetstreamstore; the tests' in-memory one in lease/leasetest), the Gate every
// call checks, and Machine, the ownership state machine.
//
// Machine is pure: time is an input, it starts no goroutine and does no I/O. It is a
// transition function over named sub-states (SubState; the public State is derived
// from it), by the table written above Machine, which the machine also consults: a move
// the table does not allow is reported (EventIllegalTransition) and counted. A driver
// (the ownership actor in package actors) feeds it inputs and carries out, in order,
// what each step's Output asks, never comparing states itself:
//
//  1. Start: the machine asks for a Read of the lease.
//  2. The driver runs each Op (at most one is in flight), on the worker its Purpose
//     calls for (claim, renewal, release), and reports the outcome with Done. Outcomes
//     are classified three ways: committed, a conflict (ErrConflict: surely not
//     committed), or unknown (any other error: maybe committed).
//  3. Output.Watch turns the watch of the lease on or off; while on, the driver reports
//     every record it sees with Observe. Output.EpochWatch does the same for the epoch
//     record, reported with ObserveEpoch.
//  4. The driver arms its timers at Output.Deadlines (renewal, fence, takeover, standby
//     timeout, retry) and calls Tick when one fires; late ticks are fine, early ones do
//     nothing.
//  5. It moves the Gate as Output.Gate says and broadcasts Output.Role, the role change
//     of the step (serving under an epoch, standing by, fenced, lost, released, claim
//     failed), and Output.EpochChanged, a new epoch while serving.
//  6. Release starts a clean release; the machine ends in StateReleased. Once the
//     engine's drain is over, MarkDrained marks the epoch record drained.
//
// The rules (docs/design.md §4.1, §5; the ADR's "Starting a serving engine", "Fencing"):
//
//   - lease free: create it, publish our lease period (Store.Publish), and serve;
//   - held with no rollout id or the holder's: watch it for one lease period (the
//     longer of ours and the one the holder published); if it renews, fail with
//     *AlreadyServingError; if it stays silent, take it over by compare-and-swap on the
//     revision seen;
//   - held by another rollout: stand by at once; take over on release or after one
//     silent lease period; give up after the standby timeout (*StandbyTimeoutError), or
//     when an engine of our own rollout takes it first (*AlreadyServingError);
//   - serving: renew every lease/4, each call cut off after lease/4; a conflict re-reads,
//     and a holder that is still us (a renewal whose reply was lost) is renewed at the
//     revision read; a deleted lease is created again; another holder is StateLost;
//   - no renewal succeeded for lease/2, counted from when the last successful one (or
//     the write that took the lease) was sent: StateFenced; a successful renewal serves
//     again;
//   - while holding, the watch stays on: a record we did not write (a delete, a purge,
//     another value) fences at once (EventEvicted), and a read decides what follows, by
//     the rules of a renewal conflict;
//   - release deletes at our revision; on a conflict it re-reads and deletes again only
//     while the holder is still us. It never deletes another engine's lease;
//   - the epoch: after every write that takes the lease, before serving, the holder
//     reads the epoch record and takes the next epoch at once, or, when the lease was
//     released by an engine that still drains the recorded epoch, serves under that
//     epoch and takes the next once the record says drained or its own drain_seconds
//     have passed since it took the lease. A release from serving marks the record
//     draining before its delete and drained after the drain (docs/architecture.md,
//     "Epoch").
//
// Expiry is observed, never computed from another host's clock: a contender counts a
// lease period from the moment it first saw the current revision, on its own monotonic
// clock.
package lease
