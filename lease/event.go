package lease

import "fmt"

// EventKind names something a driver logs once and counts.
type EventKind uint8

// Events. Each carries the holder it concerns and, for failures, the error.
const (
	EventAcquired          EventKind = iota + 1 // took a free lease
	EventTookOver                               // took over a silent holder's lease
	EventStandingBy                             // another rollout holds it
	EventRefused                                // claim failed: another engine serves
	EventStandbyTimedOut                        // no handover within the standby timeout
	EventRenewed                                // a renewal succeeded
	EventRenewFailed                            // a renewal's outcome is unknown
	EventFenced                                 // no renewal for lease/2: stopped serving
	EventRestored                               // renewed again after fencing: serving
	EventLost                                   // another engine holds the lease
	EventReleased                               // released at our revision
	EventReleaseSkipped                         // nothing of ours to delete
	EventReleaseFailed                          // delete's outcome unknown; frees itself after a lease
	EventStoreError                             // a claim-side call failed; retried
	EventEvicted                                // a write not ours changed our key: stopped serving
	EventIllegalTransition                      // a bug: a move the transition table does not allow (Err: *TransitionError)
	EventEpochBumped                            // we took the next epoch (Epoch; PrevEpoch and Holder: the record before; Deferred)
	EventEpochDeferred                          // we serve under Epoch, which Holder drains; the bump waits
	EventEpochFailed                            // settling or bumping the epoch failed (Err); retried
	EventEpochMarked                            // a release marked our epoch draining or drained (EpochState)
	EventEpochMarkSkipped                       // the epoch record moved on, or the mark failed (Err): not marked
	EventHandedOff                              // released by the released-to form (Holder: the form written; Revision: its revision)
	EventHandedOver                             // a lease released to us (Holder: the form) is taken at once
	EventStoreAhead                             // a data store holds Epoch, not below ours (PrevEpoch); Intact: our record was found
)

var eventNames = map[EventKind]string{
	EventAcquired: "acquired", EventTookOver: "took_over", EventStandingBy: "standing_by",
	EventRefused: "refused", EventStandbyTimedOut: "standby_timed_out", EventRenewed: "renewed",
	EventRenewFailed: "renew_failed", EventFenced: "fenced", EventRestored: "restored",
	EventLost: "lost", EventReleased: "released", EventReleaseSkipped: "release_skipped",
	EventReleaseFailed: "release_failed", EventStoreError: "store_error", EventEvicted: "evicted",
	EventIllegalTransition: "illegal_transition", EventEpochBumped: "epoch_bumped",
	EventEpochDeferred: "epoch_deferred", EventEpochFailed: "epoch_failed", EventEpochMarked: "epoch_marked",
	EventEpochMarkSkipped: "epoch_mark_skipped", EventHandedOff: "handed_off", EventHandedOver: "handed_over",
	EventStoreAhead: "store_ahead",
}

func (k EventKind) String() string {
	if s, ok := eventNames[k]; ok {
		return s
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a typed observation of the machine for logs and metrics.
type Event struct {
	Kind     EventKind
	Holder   Holder // the other engine, for standby, refusal, takeover, eviction and loss
	Revision uint64
	Err      error
	// The epoch events: the epoch bumped to, deferred under or marked; the one the
	// record had before a bump (its engine in Holder); whether the bump was deferred;
	// the state a mark wrote.
	Epoch      uint64
	PrevEpoch  uint64
	Deferred   bool
	EpochState EpochState
	// Intact (store ahead) says the epoch record was found at our last settle: a store
	// ahead of it was written by something other than an engine; otherwise the record
	// was lost (or never written) and the store remembers what it forgot.
	Intact bool
}
