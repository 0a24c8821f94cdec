package lease

import (
	"errors"
	"fmt"

	"github.com/abi-engine/engine/internal/fsmtable"
)

// Input is what moves a Machine: one of its methods, or a deadline reached.
type Input uint8

const (
	InputStart       Input = iota + 1 // Start
	InputObserve                      // Observe: a record the watch delivered
	InputDone                         // Done: the outcome of the call in flight
	InputDeadline                     // a deadline reached: checked on Tick and after every other input
	InputRelease                      // Release
	InputMarkDrained                  // MarkDrained: the handover's drain is over
	InputStoreAhead                   // StoreAhead: a data store holds a newer epoch than ours
)

func (in Input) String() string {
	switch in {
	case InputStart:
		return "Start"
	case InputObserve:
		return "Observe"
	case InputDone:
		return "Done"
	case InputDeadline:
		return "Deadline"
	case InputRelease:
		return "Release"
	case InputMarkDrained:
		return "MarkDrained"
	case InputStoreAhead:
		return "StoreAhead"
	}
	return fmt.Sprintf("Input(%d)", uint8(in))
}

// ErrIllegalTransition is matched by every *TransitionError.
var ErrIllegalTransition = errors.New("lease: illegal transition")

// TransitionError is a move the transition table does not allow, or a sub-state left
// in a shape its row forbids (Reason): a bug in the machine.
type TransitionError struct {
	From, To SubState
	Input    Input
	Reason   string
}

func (e *TransitionError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("lease: illegal transition: %s after %s: %s", e.To, e.Input, e.Reason)
	}
	return fmt.Sprintf("lease: illegal transition from %s to %s on %s", e.From, e.To, e.Input)
}

func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// transition is a row of the table above Machine: in From, input In (when the
// condition When holds) moves the machine to To.
type transition = fsmtable.Row[SubState, Input]

// row is a row of transitions, written as the table reads: from, input, when, to.
func row(from SubState, in Input, when string, to SubState) transition {
	return transition{From: from, In: in, When: when, To: to}
}

// transitions is the table above Machine, as data: to() allows only these moves, and a
// test renders it and finds it in Machine's doc comment. Rows are (from, input, when,
// to), grouped by from.
var transitions = []transition{
	row(unstarted, InputStart, "", claimReading),
	row(unstarted, InputRelease, "", released),

	row(claimReading, InputDone, "read: free", creating),
	row(claimReading, InputDone, "read: ours", publishing),
	row(claimReading, InputDone, "read: another rollout holds it", standingBy),
	row(claimReading, InputDone, "read: our rollout holds it, or we have none", claimWatching),
	row(claimReading, InputDone, "read: our rollout holds it, hot (stand by)", standingBy),
	row(claimReading, InputDone, "read: released to us (take it at once)", takingOver),
	row(claimReading, InputDone, "read: unknown", claimRetryWait),
	row(claimReading, InputRelease, "", releasingClaim),

	row(claimRetryWait, InputDeadline, "retry due", claimReading),
	row(claimRetryWait, InputRelease, "", released),

	row(creating, InputDone, "create: ok", publishing),
	row(creating, InputDone, "create: conflict or unknown", claimReading),
	row(creating, InputRelease, "", releasingClaim),

	row(claimWatching, InputObserve, "free", watchCreating),
	row(claimWatching, InputObserve, "ours", publishing),
	row(claimWatching, InputObserve, "the holder watched renewed", refused),
	row(claimWatching, InputObserve, "another holder, another rollout", standingBy),
	row(claimWatching, InputObserve, "another holder, of our rollout or we have none", claimWatching),
	row(claimWatching, InputObserve, "released to us (take it at once)", takingOver),
	row(claimWatching, InputObserve, "released to another (silent from here)", claimWatching),
	row(claimWatching, InputDeadline, "takeover due", watchReading),
	row(claimWatching, InputRelease, "", released),

	row(watchReading, InputDone, "read: the revision watched, silent", takingOver),
	row(watchReading, InputDone, "read: the revision watched, not yet silent", claimWatching),
	row(watchReading, InputDone, "read: free", watchCreating),
	row(watchReading, InputDone, "read: ours", publishing),
	row(watchReading, InputDone, "read: the holder watched renewed", refused),
	row(watchReading, InputDone, "read: another holder, another rollout", standingBy),
	row(watchReading, InputDone, "read: another holder, of our rollout or we have none", claimWatching),
	row(watchReading, InputDone, "read: released to us (take it at once)", takingOver),
	row(watchReading, InputDone, "read: released to another (silent from here)", claimWatching),
	row(watchReading, InputDone, "read: unknown", watchRetryWait),
	row(watchReading, InputRelease, "", releasingClaim),

	row(watchRetryWait, InputDeadline, "retry due", watchReading),
	row(watchRetryWait, InputObserve, "free", watchCreating),
	row(watchRetryWait, InputObserve, "ours", publishing),
	row(watchRetryWait, InputObserve, "the holder watched renewed", refused),
	row(watchRetryWait, InputObserve, "another holder, another rollout", standingBy),
	row(watchRetryWait, InputObserve, "another holder, of our rollout or we have none", claimWatching),
	row(watchRetryWait, InputObserve, "released to us (take it at once)", takingOver),
	row(watchRetryWait, InputObserve, "released to another (silent from here)", claimWatching),
	row(watchRetryWait, InputRelease, "", released),

	row(watchCreating, InputDone, "create: ok", publishing),
	row(watchCreating, InputDone, "create: conflict or unknown", watchReading),
	row(watchCreating, InputRelease, "", releasingClaim),

	row(takingOver, InputDone, "update: ok", publishing),
	row(takingOver, InputDone, "update: conflict or unknown", watchReading),
	row(takingOver, InputRelease, "", releasingClaim),

	row(standingBy, InputObserve, "free", standbyCreating),
	row(standingBy, InputObserve, "ours", standbyPublishing),
	row(standingBy, InputObserve, "an engine of our rollout", refused),
	row(standingBy, InputObserve, "another revision or holder", standingBy),
	row(standingBy, InputObserve, "an engine of our rollout, hot (wait on)", standingBy),
	row(standingBy, InputObserve, "released to us (take it at once)", standbyTakingOver),
	row(standingBy, InputObserve, "released to another (silent from here)", standingBy),
	row(standingBy, InputDeadline, "takeover due", standbyReading),
	row(standingBy, InputDeadline, "standby timeout", refused),
	row(standingBy, InputRelease, "", released),

	row(standbyReading, InputDone, "read: the revision watched, silent", standbyTakingOver),
	row(standbyReading, InputDone, "read: the revision watched, not yet silent", standingBy),
	row(standbyReading, InputDone, "read: free", standbyCreating),
	row(standbyReading, InputDone, "read: ours", standbyPublishing),
	row(standbyReading, InputDone, "read: an engine of our rollout", refused),
	row(standbyReading, InputDone, "read: another revision or holder", standingBy),
	row(standbyReading, InputDone, "read: an engine of our rollout, hot (wait on)", standingBy),
	row(standbyReading, InputDone, "read: released to us (take it at once)", standbyTakingOver),
	row(standbyReading, InputDone, "read: released to another (silent from here)", standingBy),
	row(standbyReading, InputDone, "read: unknown", standbyRetryWait),
	row(standbyReading, InputRelease, "", releasingClaim),

	row(standbyRetryWait, InputDeadline, "retry due", standbyReading),
	row(standbyRetryWait, InputDeadline, "standby timeout", refused),
	row(standbyRetryWait, InputObserve, "free", standbyCreating),
	row(standbyRetryWait, InputObserve, "ours", standbyPublishing),
	row(standbyRetryWait, InputObserve, "an engine of our rollout", refused),
	row(standbyRetryWait, InputObserve, "another revision or holder", standingBy),
	row(standbyRetryWait, InputObserve, "an engine of our rollout, hot (wait on)", standingBy),
	row(standbyRetryWait, InputObserve, "released to us (take it at once)", standbyTakingOver),
	row(standbyRetryWait, InputObserve, "released to another (silent from here)", standingBy),
	row(standbyRetryWait, InputRelease, "", released),

	row(standbyCreating, InputDone, "create: ok", standbyPublishing),
	row(standbyCreating, InputDone, "create: conflict or unknown", standbyReading),
	row(standbyCreating, InputRelease, "", releasingClaim),

	row(standbyTakingOver, InputDone, "update: ok", standbyPublishing),
	row(standbyTakingOver, InputDone, "update: conflict or unknown", standbyReading),
	row(standbyTakingOver, InputRelease, "", releasingClaim),

	row(publishing, InputDone, "publish: any outcome", settlingEpoch),
	row(publishing, InputObserve, "a write not ours", evicted),
	row(publishing, InputRelease, "", releasingClaim),

	row(standbyPublishing, InputDone, "publish: any outcome", standbySettlingEpoch),
	row(standbyPublishing, InputObserve, "a write not ours", evicted),
	row(standbyPublishing, InputRelease, "", releasingClaim),

	row(settlingEpoch, InputDone, "epoch read: bump it (write the next)", settlingEpoch),
	row(settlingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding),
	row(settlingEpoch, InputDone, "epoch write: ok", holding),
	row(settlingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", settlingEpoch),
	row(settlingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed", fenced),
	row(settlingEpoch, InputObserve, "a write not ours", evicted),
	row(settlingEpoch, InputRelease, "", releasingClaim),

	row(standbySettlingEpoch, InputDone, "epoch read: bump it (write the next)", standbySettlingEpoch),
	row(standbySettlingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding),
	row(standbySettlingEpoch, InputDone, "epoch write: ok", holding),
	row(standbySettlingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", standbySettlingEpoch),
	row(standbySettlingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed", fenced),
	row(standbySettlingEpoch, InputObserve, "a write not ours", evicted),
	row(standbySettlingEpoch, InputRelease, "", releasingClaim),

	row(holding, InputDeadline, "renewal due", renewing),
	row(holding, InputDeadline, "fence due", fenced),
	row(holding, InputDeadline, "epoch due", advancingEpoch),
	row(holding, InputObserve, "a write not ours", evictedReading),
	row(holding, InputRelease, "", releasing),

	row(renewing, InputDone, "update: ok", holding),
	row(renewing, InputDone, "update: ok, our period to publish", republishing),
	row(renewing, InputDone, "update: conflict", renewReading),
	row(renewing, InputDone, "update: unknown", holding),
	row(renewing, InputDeadline, "fence due", fencedRenewing),
	row(renewing, InputObserve, "a write not ours", evicted),
	row(renewing, InputRelease, "", releasing),

	row(renewReading, InputDone, "read: ours", renewing),
	row(renewReading, InputDone, "read: free", renewCreating),
	row(renewReading, InputDone, "read: another holder", lost),
	row(renewReading, InputDone, "read: unknown", holding),
	row(renewReading, InputDeadline, "fence due", fencedReading),
	row(renewReading, InputObserve, "a write not ours", evicted),
	row(renewReading, InputRelease, "", releasing),

	row(renewCreating, InputDone, "create: ok (settle the epoch)", advancingEpoch),
	row(renewCreating, InputDone, "create: conflict", lost),
	row(renewCreating, InputDone, "create: unknown", holding),
	row(renewCreating, InputDeadline, "fence due", fencedCreating),
	row(renewCreating, InputObserve, "a write not ours", evicted),
	row(renewCreating, InputRelease, "", releasing),

	row(republishing, InputDone, "publish: any outcome", holding),
	row(republishing, InputDeadline, "fence due", fencedPublishing),
	row(republishing, InputObserve, "a write not ours", evicted),
	row(republishing, InputRelease, "", releasing),

	row(advancingEpoch, InputDone, "epoch read: bump it (write the next)", advancingEpoch),
	row(advancingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding),
	row(advancingEpoch, InputDone, "epoch read: our write landed", holding),
	row(advancingEpoch, InputDone, "epoch write: ok", holding),
	row(advancingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", advancingEpoch),
	row(advancingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed (later)", holding),
	row(advancingEpoch, InputDeadline, "fence due", fencedSettlingEpoch),
	row(advancingEpoch, InputObserve, "a write not ours", evicted),
	row(advancingEpoch, InputRelease, "", releasing),

	row(fenced, InputDeadline, "renewal due", fencedRenewing),
	row(fenced, InputObserve, "a write not ours", evictedReading),
	row(fenced, InputRelease, "", fencedReleasing),

	row(fencedRenewing, InputDone, "update: ok in time", holding),
	row(fencedRenewing, InputDone, "update: ok in time, our period to publish", republishing),
	row(fencedRenewing, InputDone, "update: ok in time, the epoch to settle", fencedSettlingEpoch),
	row(fencedRenewing, InputDone, "update: ok too late", fenced),
	row(fencedRenewing, InputDone, "update: conflict", fencedReading),
	row(fencedRenewing, InputDone, "update: unknown", fenced),
	row(fencedRenewing, InputObserve, "a write not ours", evicted),
	row(fencedRenewing, InputRelease, "", fencedReleasing),

	row(fencedReading, InputDone, "read: ours", fencedRenewing),
	row(fencedReading, InputDone, "read: free", fencedCreating),
	row(fencedReading, InputDone, "read: another holder", lost),
	row(fencedReading, InputDone, "read: unknown", fenced),
	row(fencedReading, InputObserve, "a write not ours", evicted),
	row(fencedReading, InputRelease, "", fencedReleasing),

	row(fencedCreating, InputDone, "create: ok in time (settle the epoch)", fencedSettlingEpoch),
	row(fencedCreating, InputDone, "create: ok too late", fenced),
	row(fencedCreating, InputDone, "create: conflict", lost),
	row(fencedCreating, InputDone, "create: unknown", fenced),
	row(fencedCreating, InputObserve, "a write not ours", evicted),
	row(fencedCreating, InputRelease, "", fencedReleasing),

	row(fencedPublishing, InputDone, "publish: any outcome", fenced),
	row(fencedPublishing, InputObserve, "a write not ours", evicted),
	row(fencedPublishing, InputRelease, "", fencedReleasing),

	row(fencedSettlingEpoch, InputDone, "epoch read: bump it (write the next)", fencedSettlingEpoch),
	row(fencedSettlingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding),
	row(fencedSettlingEpoch, InputDone, "epoch read: our write landed", holding),
	row(fencedSettlingEpoch, InputDone, "epoch write: ok", holding),
	row(fencedSettlingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", fencedSettlingEpoch),
	row(fencedSettlingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed", fenced),
	row(fencedSettlingEpoch, InputObserve, "a write not ours", evicted),
	row(fencedSettlingEpoch, InputRelease, "", fencedReleasing),

	row(evicted, InputDone, "update or create: ok (counted, no restore)", evictedReading),
	row(evicted, InputDone, "update: conflict", evictedReading),
	row(evicted, InputDone, "any call: unknown", evictedReading),
	row(evicted, InputDone, "publish: any outcome", evictedReading),
	row(evicted, InputDone, "read: free (create it)", evicted),
	row(evicted, InputDone, "read: ours (renew at it)", evicted),
	row(evicted, InputDone, "read: another holder", lost),
	row(evicted, InputDone, "create: conflict", lost),
	row(evicted, InputDone, "epoch call: any outcome", evictedReading),
	row(evicted, InputRelease, "", evictedReleasing),

	row(evictedReading, InputDone, "read: ours", fencedRenewing),
	row(evictedReading, InputDone, "read: free", fencedCreating),
	row(evictedReading, InputDone, "read: another holder", lost),
	row(evictedReading, InputDone, "read: unknown", fenced),
	row(evictedReading, InputObserve, "a write not ours", evicted),
	row(evictedReading, InputRelease, "", fencedReleasing),

	row(releasingClaim, InputDone, "claim read: ours (delete it)", releasingClaim),
	row(releasingClaim, InputDone, "claim read: not ours, or unknown", released),
	row(releasingClaim, InputDone, "create or update: ok (delete it)", releasingClaim),
	row(releasingClaim, InputDone, "create or update: conflict or unknown", released),
	row(releasingClaim, InputDone, "publish: any outcome (delete)", releasingClaim),
	row(releasingClaim, InputDone, "delete: ok or unknown", released),
	row(releasingClaim, InputDone, "delete: conflict (read)", releasingClaim),
	row(releasingClaim, InputDone, "release read: ours, < 3 deletes (delete)", releasingClaim),
	row(releasingClaim, InputDone, "release read: other, or unknown", released),
	row(releasingClaim, InputDone, "epoch call: any outcome (delete)", releasingClaim),

	row(releasing, InputDone, "renewal: ok (delete)", releasing),
	row(releasing, InputDone, "renewal: update conflict (read)", releasing),
	row(releasing, InputDone, "renewal: unknown (delete)", releasing),
	row(releasing, InputDone, "renewal read: ours (delete at it)", releasing),
	row(releasing, InputDone, "renewal read: free", released),
	row(releasing, InputDone, "renewal: another holder", lost),
	row(releasing, InputDone, "publish: any outcome (delete)", releasing),
	row(releasing, InputDone, "delete: ok or unknown", released),
	row(releasing, InputDone, "delete: conflict (read)", releasing),
	row(releasing, InputDone, "hand-off write: ok or unknown", released),
	row(releasing, InputDone, "hand-off write: conflict (read)", releasing),
	row(releasing, InputDone, "release read: ours, < 3 deletes (delete)", releasing),
	row(releasing, InputDone, "release read: other, or unknown", released),
	row(releasing, InputDone, "epoch settle: any outcome (mark draining, or delete)", releasing),
	row(releasing, InputDone, "mark draining: ok or unknown (delete)", releasing),
	row(releasing, InputDone, "mark draining: conflict (read)", releasing),
	row(releasing, InputDone, "draining read: our epoch, < 2 marks (mark again)", releasing),
	row(releasing, InputDone, "draining read: moved on, or unknown (delete)", releasing),
	row(releasing, InputDeadline, "fence due", fencedReleasing),

	row(fencedReleasing, InputDone, "renewal: ok in time (delete)", releasing),
	row(fencedReleasing, InputDone, "renewal: ok too late (delete)", fencedReleasing),
	row(fencedReleasing, InputDone, "renewal: ok in time, the epoch to settle (delete)", fencedReleasing),
	row(fencedReleasing, InputDone, "renewal: update conflict (read)", fencedReleasing),
	row(fencedReleasing, InputDone, "renewal: unknown (delete)", fencedReleasing),
	row(fencedReleasing, InputDone, "renewal read: ours (delete at it)", fencedReleasing),
	row(fencedReleasing, InputDone, "renewal read: free", released),
	row(fencedReleasing, InputDone, "renewal: another holder", lost),
	row(fencedReleasing, InputDone, "publish: any outcome (delete)", fencedReleasing),
	row(fencedReleasing, InputDone, "delete: ok or unknown", released),
	row(fencedReleasing, InputDone, "delete: conflict (read)", fencedReleasing),
	row(fencedReleasing, InputDone, "release read: ours, < 3 deletes (delete)", fencedReleasing),
	row(fencedReleasing, InputDone, "release read: other, or unknown", released),
	row(fencedReleasing, InputDone, "epoch call: any outcome (delete)", fencedReleasing),

	row(evictedReleasing, InputDone, "renewal: ok (no restore; delete)", fencedReleasing),
	row(evictedReleasing, InputDone, "renewal: update conflict (read)", fencedReleasing),
	row(evictedReleasing, InputDone, "renewal: unknown (delete)", fencedReleasing),
	row(evictedReleasing, InputDone, "renewal read: ours (delete at it)", fencedReleasing),
	row(evictedReleasing, InputDone, "renewal read: free", released),
	row(evictedReleasing, InputDone, "renewal: another holder", lost),
	row(evictedReleasing, InputDone, "publish: any outcome (delete)", fencedReleasing),
	row(evictedReleasing, InputDone, "epoch call: any outcome (delete)", fencedReleasing),

	row(released, InputMarkDrained, "the record marked draining", markingDrained),

	row(markingDrained, InputDone, "mark drained: ok or unknown", released),
	row(markingDrained, InputDone, "mark drained: conflict (read)", markingDrained),
	row(markingDrained, InputDone, "drained read: still ours, < 2 marks (mark again)", markingDrained),
	row(markingDrained, InputDone, "drained read: moved on, or unknown", released),

	row(refused, InputRelease, "", released),
}

// transitionTable indexes transitions for to() and renders them for Machine's doc
// comment, in columns of 25 and 47.
var transitionTable = fsmtable.New(transitions, 25, 47)
