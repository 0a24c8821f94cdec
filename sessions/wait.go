package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrSessionsOpen is what WaitForSessions returns (wrapped, with the context's error)
// when some host still had sessions open at the deadline.
var ErrSessionsOpen = errors.New("sessions still open")

// WaitForSessions waits, until deadline at the latest, for every host to report that
// nothing is open, in two rounds: each round asks every host's SessionsFinished
// concurrently and ends when all have answered.
//
// Why two: while the first round runs, a ServicePrimary answers the calls it had
// received, and an answer too large for one message is parked on the overflow host,
// which may already have reported "nothing open". After the first round every primary
// has answered everything and no shared subscription takes new work (the caller ran
// StopAccepting on every host before), so nothing can open a session any more; the
// second round catches what the first one opened.
//
// It returns nil when both rounds finished. When the deadline (or ctx) ends a round
// first, it returns an error wrapping ErrSessionsOpen and the context's error at once;
// the caller then Stops every host. A host whose SessionsFinished fails for another
// reason counts as finished, as it would otherwise hold the handover until the
// deadline for nothing; its error is returned, joined, after both rounds. Hosts must
// return from SessionsFinished when its context ends.
func WaitForSessions(ctx context.Context, deadline time.Time, hosts ...Host) error {
	if len(hosts) == 0 {
		return nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var failures []error
	for round := 1; round <= 2; round++ {
		open, failed := waitRound(ctx, hosts)
		failures = append(failures, failed...)
		if open > 0 {
			return errors.Join(append([]error{fmt.Errorf("%w on %d of %d hosts after round %d of 2: %w",
				ErrSessionsOpen, open, len(hosts), round, context.Cause(ctx))}, failures...)...)
		}
	}
	return errors.Join(failures...)
}

// waitRound asks every host at once and returns how many still had sessions open when
// ctx ended, and the other failures.
func waitRound(ctx context.Context, hosts []Host) (open int, failed []error) {
	if ctx.Err() != nil {
		return len(hosts), nil
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i, h := range hosts {
		wg.Go(func() {
			err := h.SessionsFinished(ctx)
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ctx.Err() != nil {
				open++
				return
			}
			failed = append(failed, fmt.Errorf("host %d (%T): waiting for its sessions failed; counted as finished: %w", i, h, err))
		})
	}
	wg.Wait()
	return open, failed
}
