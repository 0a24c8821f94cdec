package lease

import (
	"errors"
	"fmt"
	"strings"
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
type transition struct {
	From SubState
	In   Input
	When string
	To   SubState
}

// transitions is the table above Machine, as data: to() allows only these moves, and a
// test renders it and finds it in Machine's doc comment. Rows are (from, input, when,
// to), grouped by from.
var transitions = []transition{
	{unstarted, InputStart, "", claimReading},
	{unstarted, InputRelease, "", released},

	{claimReading, InputDone, "read: free", creating},
	{claimReading, InputDone, "read: ours", publishing},
	{claimReading, InputDone, "read: another rollout holds it", standingBy},
	{claimReading, InputDone, "read: our rollout holds it, or we have none", claimWatching},
	{claimReading, InputDone, "read: our rollout holds it, hot (stand by)", standingBy},
	{claimReading, InputDone, "read: released to us (take it at once)", takingOver},
	{claimReading, InputDone, "read: unknown", claimRetryWait},
	{claimReading, InputRelease, "", releasingClaim},

	{claimRetryWait, InputDeadline, "retry due", claimReading},
	{claimRetryWait, InputRelease, "", released},

	{creating, InputDone, "create: ok", publishing},
	{creating, InputDone, "create: conflict or unknown", claimReading},
	{creating, InputRelease, "", releasingClaim},

	{claimWatching, InputObserve, "free", watchCreating},
	{claimWatching, InputObserve, "ours", publishing},
	{claimWatching, InputObserve, "the holder watched renewed", refused},
	{claimWatching, InputObserve, "another holder, another rollout", standingBy},
	{claimWatching, InputObserve, "another holder, of our rollout or we have none", claimWatching},
	{claimWatching, InputObserve, "released to us (take it at once)", takingOver},
	{claimWatching, InputObserve, "released to another (silent from here)", claimWatching},
	{claimWatching, InputDeadline, "takeover due", watchReading},
	{claimWatching, InputRelease, "", released},

	{watchReading, InputDone, "read: the revision watched, silent", takingOver},
	{watchReading, InputDone, "read: the revision watched, not yet silent", claimWatching},
	{watchReading, InputDone, "read: free", watchCreating},
	{watchReading, InputDone, "read: ours", publishing},
	{watchReading, InputDone, "read: the holder watched renewed", refused},
	{watchReading, InputDone, "read: another holder, another rollout", standingBy},
	{watchReading, InputDone, "read: another holder, of our rollout or we have none", claimWatching},
	{watchReading, InputDone, "read: released to us (take it at once)", takingOver},
	{watchReading, InputDone, "read: released to another (silent from here)", claimWatching},
	{watchReading, InputDone, "read: unknown", watchRetryWait},
	{watchReading, InputRelease, "", releasingClaim},

	{watchRetryWait, InputDeadline, "retry due", watchReading},
	{watchRetryWait, InputObserve, "free", watchCreating},
	{watchRetryWait, InputObserve, "ours", publishing},
	{watchRetryWait, InputObserve, "the holder watched renewed", refused},
	{watchRetryWait, InputObserve, "another holder, another rollout", standingBy},
	{watchRetryWait, InputObserve, "another holder, of our rollout or we have none", claimWatching},
	{watchRetryWait, InputObserve, "released to us (take it at once)", takingOver},
	{watchRetryWait, InputObserve, "released to another (silent from here)", claimWatching},
	{watchRetryWait, InputRelease, "", released},

	{watchCreating, InputDone, "create: ok", publishing},
	{watchCreating, InputDone, "create: conflict or unknown", watchReading},
	{watchCreating, InputRelease, "", releasingClaim},

	{takingOver, InputDone, "update: ok", publishing},
	{takingOver, InputDone, "update: conflict or unknown", watchReading},
	{takingOver, InputRelease, "", releasingClaim},

	{standingBy, InputObserve, "free", standbyCreating},
	{standingBy, InputObserve, "ours", standbyPublishing},
	{standingBy, InputObserve, "an engine of our rollout", refused},
	{standingBy, InputObserve, "another revision or holder", standingBy},
	{standingBy, InputObserve, "an engine of our rollout, hot (wait on)", standingBy},
	{standingBy, InputObserve, "released to us (take it at once)", standbyTakingOver},
	{standingBy, InputObserve, "released to another (silent from here)", standingBy},
	{standingBy, InputDeadline, "takeover due", standbyReading},
	{standingBy, InputDeadline, "standby timeout", refused},
	{standingBy, InputRelease, "", released},

	{standbyReading, InputDone, "read: the revision watched, silent", standbyTakingOver},
	{standbyReading, InputDone, "read: the revision watched, not yet silent", standingBy},
	{standbyReading, InputDone, "read: free", standbyCreating},
	{standbyReading, InputDone, "read: ours", standbyPublishing},
	{standbyReading, InputDone, "read: an engine of our rollout", refused},
	{standbyReading, InputDone, "read: another revision or holder", standingBy},
	{standbyReading, InputDone, "read: an engine of our rollout, hot (wait on)", standingBy},
	{standbyReading, InputDone, "read: released to us (take it at once)", standbyTakingOver},
	{standbyReading, InputDone, "read: released to another (silent from here)", standingBy},
	{standbyReading, InputDone, "read: unknown", standbyRetryWait},
	{standbyReading, InputRelease, "", releasingClaim},

	{standbyRetryWait, InputDeadline, "retry due", standbyReading},
	{standbyRetryWait, InputDeadline, "standby timeout", refused},
	{standbyRetryWait, InputObserve, "free", standbyCreating},
	{standbyRetryWait, InputObserve, "ours", standbyPublishing},
	{standbyRetryWait, InputObserve, "an engine of our rollout", refused},
	{standbyRetryWait, InputObserve, "another revision or holder", standingBy},
	{standbyRetryWait, InputObserve, "an engine of our rollout, hot (wait on)", standingBy},
	{standbyRetryWait, InputObserve, "released to us (take it at once)", standbyTakingOver},
	{standbyRetryWait, InputObserve, "released to another (silent from here)", standingBy},
	{standbyRetryWait, InputRelease, "", released},

	{standbyCreating, InputDone, "create: ok", standbyPublishing},
	{standbyCreating, InputDone, "create: conflict or unknown", standbyReading},
	{standbyCreating, InputRelease, "", releasingClaim},

	{standbyTakingOver, InputDone, "update: ok", standbyPublishing},
	{standbyTakingOver, InputDone, "update: conflict or unknown", standbyReading},
	{standbyTakingOver, InputRelease, "", releasingClaim},

	{publishing, InputDone, "publish: any outcome", settlingEpoch},
	{publishing, InputObserve, "a write not ours", evicted},
	{publishing, InputRelease, "", releasingClaim},

	{standbyPublishing, InputDone, "publish: any outcome", standbySettlingEpoch},
	{standbyPublishing, InputObserve, "a write not ours", evicted},
	{standbyPublishing, InputRelease, "", releasingClaim},

	{settlingEpoch, InputDone, "epoch read: bump it (write the next)", settlingEpoch},
	{settlingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding},
	{settlingEpoch, InputDone, "epoch write: ok", holding},
	{settlingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", settlingEpoch},
	{settlingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed", fenced},
	{settlingEpoch, InputObserve, "a write not ours", evicted},
	{settlingEpoch, InputRelease, "", releasingClaim},

	{standbySettlingEpoch, InputDone, "epoch read: bump it (write the next)", standbySettlingEpoch},
	{standbySettlingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding},
	{standbySettlingEpoch, InputDone, "epoch write: ok", holding},
	{standbySettlingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", standbySettlingEpoch},
	{standbySettlingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed", fenced},
	{standbySettlingEpoch, InputObserve, "a write not ours", evicted},
	{standbySettlingEpoch, InputRelease, "", releasingClaim},

	{holding, InputDeadline, "renewal due", renewing},
	{holding, InputDeadline, "fence due", fenced},
	{holding, InputDeadline, "epoch due", advancingEpoch},
	{holding, InputObserve, "a write not ours", evictedReading},
	{holding, InputRelease, "", releasing},

	{renewing, InputDone, "update: ok", holding},
	{renewing, InputDone, "update: ok, our period to publish", republishing},
	{renewing, InputDone, "update: conflict", renewReading},
	{renewing, InputDone, "update: unknown", holding},
	{renewing, InputDeadline, "fence due", fencedRenewing},
	{renewing, InputObserve, "a write not ours", evicted},
	{renewing, InputRelease, "", releasing},

	{renewReading, InputDone, "read: ours", renewing},
	{renewReading, InputDone, "read: free", renewCreating},
	{renewReading, InputDone, "read: another holder", lost},
	{renewReading, InputDone, "read: unknown", holding},
	{renewReading, InputDeadline, "fence due", fencedReading},
	{renewReading, InputObserve, "a write not ours", evicted},
	{renewReading, InputRelease, "", releasing},

	{renewCreating, InputDone, "create: ok (settle the epoch)", advancingEpoch},
	{renewCreating, InputDone, "create: conflict", lost},
	{renewCreating, InputDone, "create: unknown", holding},
	{renewCreating, InputDeadline, "fence due", fencedCreating},
	{renewCreating, InputObserve, "a write not ours", evicted},
	{renewCreating, InputRelease, "", releasing},

	{republishing, InputDone, "publish: any outcome", holding},
	{republishing, InputDeadline, "fence due", fencedPublishing},
	{republishing, InputObserve, "a write not ours", evicted},
	{republishing, InputRelease, "", releasing},

	{advancingEpoch, InputDone, "epoch read: bump it (write the next)", advancingEpoch},
	{advancingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding},
	{advancingEpoch, InputDone, "epoch read: our write landed", holding},
	{advancingEpoch, InputDone, "epoch write: ok", holding},
	{advancingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", advancingEpoch},
	{advancingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed (later)", holding},
	{advancingEpoch, InputDeadline, "fence due", fencedSettlingEpoch},
	{advancingEpoch, InputObserve, "a write not ours", evicted},
	{advancingEpoch, InputRelease, "", releasing},

	{fenced, InputDeadline, "renewal due", fencedRenewing},
	{fenced, InputObserve, "a write not ours", evictedReading},
	{fenced, InputRelease, "", fencedReleasing},

	{fencedRenewing, InputDone, "update: ok in time", holding},
	{fencedRenewing, InputDone, "update: ok in time, our period to publish", republishing},
	{fencedRenewing, InputDone, "update: ok in time, the epoch to settle", fencedSettlingEpoch},
	{fencedRenewing, InputDone, "update: ok too late", fenced},
	{fencedRenewing, InputDone, "update: conflict", fencedReading},
	{fencedRenewing, InputDone, "update: unknown", fenced},
	{fencedRenewing, InputObserve, "a write not ours", evicted},
	{fencedRenewing, InputRelease, "", fencedReleasing},

	{fencedReading, InputDone, "read: ours", fencedRenewing},
	{fencedReading, InputDone, "read: free", fencedCreating},
	{fencedReading, InputDone, "read: another holder", lost},
	{fencedReading, InputDone, "read: unknown", fenced},
	{fencedReading, InputObserve, "a write not ours", evicted},
	{fencedReading, InputRelease, "", fencedReleasing},

	{fencedCreating, InputDone, "create: ok in time (settle the epoch)", fencedSettlingEpoch},
	{fencedCreating, InputDone, "create: ok too late", fenced},
	{fencedCreating, InputDone, "create: conflict", lost},
	{fencedCreating, InputDone, "create: unknown", fenced},
	{fencedCreating, InputObserve, "a write not ours", evicted},
	{fencedCreating, InputRelease, "", fencedReleasing},

	{fencedPublishing, InputDone, "publish: any outcome", fenced},
	{fencedPublishing, InputObserve, "a write not ours", evicted},
	{fencedPublishing, InputRelease, "", fencedReleasing},

	{fencedSettlingEpoch, InputDone, "epoch read: bump it (write the next)", fencedSettlingEpoch},
	{fencedSettlingEpoch, InputDone, "epoch read: another engine drains it (defer)", holding},
	{fencedSettlingEpoch, InputDone, "epoch read: our write landed", holding},
	{fencedSettlingEpoch, InputDone, "epoch write: ok", holding},
	{fencedSettlingEpoch, InputDone, "epoch write: conflict, < 2 writes (read)", fencedSettlingEpoch},
	{fencedSettlingEpoch, InputDone, "epoch call: unknown, a second conflict, or the fence passed", fenced},
	{fencedSettlingEpoch, InputObserve, "a write not ours", evicted},
	{fencedSettlingEpoch, InputRelease, "", fencedReleasing},

	{evicted, InputDone, "update or create: ok (counted, no restore)", evictedReading},
	{evicted, InputDone, "update: conflict", evictedReading},
	{evicted, InputDone, "any call: unknown", evictedReading},
	{evicted, InputDone, "publish: any outcome", evictedReading},
	{evicted, InputDone, "read: free (create it)", evicted},
	{evicted, InputDone, "read: ours (renew at it)", evicted},
	{evicted, InputDone, "read: another holder", lost},
	{evicted, InputDone, "create: conflict", lost},
	{evicted, InputDone, "epoch call: any outcome", evictedReading},
	{evicted, InputRelease, "", evictedReleasing},

	{evictedReading, InputDone, "read: ours", fencedRenewing},
	{evictedReading, InputDone, "read: free", fencedCreating},
	{evictedReading, InputDone, "read: another holder", lost},
	{evictedReading, InputDone, "read: unknown", fenced},
	{evictedReading, InputObserve, "a write not ours", evicted},
	{evictedReading, InputRelease, "", fencedReleasing},

	{releasingClaim, InputDone, "claim read: ours (delete it)", releasingClaim},
	{releasingClaim, InputDone, "claim read: not ours, or unknown", released},
	{releasingClaim, InputDone, "create or update: ok (delete it)", releasingClaim},
	{releasingClaim, InputDone, "create or update: conflict or unknown", released},
	{releasingClaim, InputDone, "publish: any outcome (delete)", releasingClaim},
	{releasingClaim, InputDone, "delete: ok or unknown", released},
	{releasingClaim, InputDone, "delete: conflict (read)", releasingClaim},
	{releasingClaim, InputDone, "release read: ours, < 3 deletes (delete)", releasingClaim},
	{releasingClaim, InputDone, "release read: other, or unknown", released},
	{releasingClaim, InputDone, "epoch call: any outcome (delete)", releasingClaim},

	{releasing, InputDone, "renewal: ok (delete)", releasing},
	{releasing, InputDone, "renewal: update conflict (read)", releasing},
	{releasing, InputDone, "renewal: unknown (delete)", releasing},
	{releasing, InputDone, "renewal read: ours (delete at it)", releasing},
	{releasing, InputDone, "renewal read: free", released},
	{releasing, InputDone, "renewal: another holder", lost},
	{releasing, InputDone, "publish: any outcome (delete)", releasing},
	{releasing, InputDone, "delete: ok or unknown", released},
	{releasing, InputDone, "delete: conflict (read)", releasing},
	{releasing, InputDone, "hand-off write: ok or unknown", released},
	{releasing, InputDone, "hand-off write: conflict (read)", releasing},
	{releasing, InputDone, "release read: ours, < 3 deletes (delete)", releasing},
	{releasing, InputDone, "release read: other, or unknown", released},
	{releasing, InputDone, "epoch settle: any outcome (mark draining, or delete)", releasing},
	{releasing, InputDone, "mark draining: ok or unknown (delete)", releasing},
	{releasing, InputDone, "mark draining: conflict (read)", releasing},
	{releasing, InputDone, "draining read: our epoch, < 2 marks (mark again)", releasing},
	{releasing, InputDone, "draining read: moved on, or unknown (delete)", releasing},
	{releasing, InputDeadline, "fence due", fencedReleasing},

	{fencedReleasing, InputDone, "renewal: ok in time (delete)", releasing},
	{fencedReleasing, InputDone, "renewal: ok too late (delete)", fencedReleasing},
	{fencedReleasing, InputDone, "renewal: ok in time, the epoch to settle (delete)", fencedReleasing},
	{fencedReleasing, InputDone, "renewal: update conflict (read)", fencedReleasing},
	{fencedReleasing, InputDone, "renewal: unknown (delete)", fencedReleasing},
	{fencedReleasing, InputDone, "renewal read: ours (delete at it)", fencedReleasing},
	{fencedReleasing, InputDone, "renewal read: free", released},
	{fencedReleasing, InputDone, "renewal: another holder", lost},
	{fencedReleasing, InputDone, "publish: any outcome (delete)", fencedReleasing},
	{fencedReleasing, InputDone, "delete: ok or unknown", released},
	{fencedReleasing, InputDone, "delete: conflict (read)", fencedReleasing},
	{fencedReleasing, InputDone, "release read: ours, < 3 deletes (delete)", fencedReleasing},
	{fencedReleasing, InputDone, "release read: other, or unknown", released},
	{fencedReleasing, InputDone, "epoch call: any outcome (delete)", fencedReleasing},

	{evictedReleasing, InputDone, "renewal: ok (no restore; delete)", fencedReleasing},
	{evictedReleasing, InputDone, "renewal: update conflict (read)", fencedReleasing},
	{evictedReleasing, InputDone, "renewal: unknown (delete)", fencedReleasing},
	{evictedReleasing, InputDone, "renewal read: ours (delete at it)", fencedReleasing},
	{evictedReleasing, InputDone, "renewal read: free", released},
	{evictedReleasing, InputDone, "renewal: another holder", lost},
	{evictedReleasing, InputDone, "publish: any outcome (delete)", fencedReleasing},
	{evictedReleasing, InputDone, "epoch call: any outcome (delete)", fencedReleasing},

	{released, InputMarkDrained, "the record marked draining", markingDrained},

	{markingDrained, InputDone, "mark drained: ok or unknown", released},
	{markingDrained, InputDone, "mark drained: conflict (read)", markingDrained},
	{markingDrained, InputDone, "drained read: still ours, < 2 marks (mark again)", markingDrained},
	{markingDrained, InputDone, "drained read: moved on, or unknown", released},

	{refused, InputRelease, "", released},
}

type move struct {
	from, to SubState
	in       Input
}

// legalMoves indexes transitions.
var legalMoves = func() map[move]bool {
	m := make(map[move]bool, len(transitions))
	for _, t := range transitions {
		m[move{t.From, t.To, t.In}] = true
	}
	return m
}()

func legal(from SubState, in Input, to SubState) bool { return legalMoves[move{from, to, in}] }

// tableText renders transitions as the table in Machine's doc comment.
func tableText() string {
	var b strings.Builder
	for i, t := range transitions {
		from := t.From.String()
		if i > 0 && transitions[i-1].From == t.From {
			from = ""
		} else if i > 0 {
			b.WriteString("\n")
		}
		in := t.In.String()
		if t.When != "" {
			in += " " + t.When
		}
		fmt.Fprintf(&b, "%-25s %-47s → %s\n", from, in, t.To)
	}
	return b.String()
}
