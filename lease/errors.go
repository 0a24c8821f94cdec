package lease

import (
	"errors"
	"fmt"
	"time"
)

// ErrOwnership is matched by every error the ownership machine ends a claim with.
var ErrOwnership = errors.New("lease: ownership")

// AlreadyServingError is a claim refused because a live engine holds the lease and
// this one may not stand by (no rollout id, or the holder's).
type AlreadyServingError struct{ Holder Holder }

func (e *AlreadyServingError) Error() string {
	return fmt.Sprintf("another engine already serves this NATS account: %s. "+
		"Stop it first, or deploy with a new ABI_ROLLOUT_ID to take over without downtime", e.Holder)
}

func (e *AlreadyServingError) Is(target error) bool { return target == ErrOwnership }

// StandbyTimeoutError is a standby that was not handed the lease in time.
type StandbyTimeoutError struct {
	Holder  Holder
	Timeout time.Duration
}

func (e *StandbyTimeoutError) Error() string {
	return fmt.Sprintf("no handover within %s: the engine lease is still held by %s", e.Timeout, e.Holder)
}

func (e *StandbyTimeoutError) Is(target error) bool { return target == ErrOwnership }

// LostError reports that another engine took the lease while this one held it.
type LostError struct{ Holder Holder }

func (e *LostError) Error() string {
	if !e.Holder.Known() && e.Holder.Host == "" {
		return "another engine took the engine lease (holder unknown)"
	}
	return fmt.Sprintf("another engine took the engine lease: %s", e.Holder)
}

func (e *LostError) Is(target error) bool { return target == ErrOwnership }
