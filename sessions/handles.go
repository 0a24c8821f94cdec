package sessions

// The methods of TransferHost that its owner and the handover call from outside the
// actors: each sends the host actor a role command and waits for its answer, or reads
// what the host actor published. None touches the host's state.

import (
	"context"
	"errors"
	"fmt"

	"github.com/abi-engine/engine/actors"
)

// errActorGone is what a role command gets when the host actor stopped before it
// answered (poisoned by its parent, or by Close).
var errActorGone = fmt.Errorf("its actor has stopped: %w", ErrClosed)

// Serve subscribes the owner-scoped subjects and, if the host serves operations,
// <prefix>.open on queue group <prefix>.owners, and returns once the broker has
// confirmed them. Serving again after StopAccepting or Stop subscribes what is missing;
// a Serve that fails leaves the host as it found it.
func (h *TransferHost) Serve(ctx context.Context) error {
	if h.ref.Load() == nil {
		return fmt.Errorf("transfer host %s: its actor is not spawned; spawn it before Serve", h.prefix)
	}
	return h.request(ctx, actors.Serve{})
}

// StopAccepting ends the <prefix>.open subscription at the broker (StopDelivery) and
// returns once the broker confirmed it: new opens go to another engine. The opens
// already received are still answered, and open sessions go on. Calling it again
// confirms again.
func (h *TransferHost) StopAccepting(ctx context.Context) error {
	if h.ref.Load() == nil {
		return nil // never served: nothing to end
	}
	return h.request(ctx, actors.StopAccepting{})
}

// SessionsFinished returns nil once every open received before StopAccepting has been
// answered, no session is open (a session stays open until its client closes it or it
// idle-expires) and no call is in flight; or ctx's error.
func (h *TransferHost) SessionsFinished(ctx context.Context) error {
	for {
		// Watch before reading, so a change after the reads wakes the wait.
		v, changed := h.view.Watch()
		_, quiet := h.quiet.Watch()
		if d := v.drain; d != nil && !d.Finished() {
			if err := d.Wait(ctx); err != nil {
				return fmt.Errorf("transfer host %s: %w", h.prefix, err)
			}
			continue
		}
		n, k := len(v.sessions), h.inflight.Load()
		if n == 0 && k == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-quiet:
		case <-ctx.Done():
			return fmt.Errorf("transfer host %s: %d sessions open, %d calls in flight: %w", h.prefix, n, k, ctx.Err())
		}
	}
}

// Stop ends everything at once: every subscription, every open session (its actor is
// stopped and its handler cancelled; its callers then get NOT_FOUND, or no responders
// once the UNSUB has reached the broker). It returns once the handlers have returned.
// Safe to call more than once; Serve may follow it (fencing, then a renewal that
// succeeded).
func (h *TransferHost) Stop() {
	if h.ref.Load() == nil {
		return
	}
	if err := h.request(context.Background(), actors.Stop{}); errors.Is(err, errActorGone) {
		// The actor ended everything as it stopped, on goroutines of the host's.
		_ = h.steps.Wait(context.Background())
		_ = h.work.Wait(context.Background())
	}
}

// Close stops the host for good and waits, until ctx ends at the latest, for everything
// it started: the broker steps, the handlers (whose contexts it cancels first), the
// session actors and the host actor itself. A closed host never serves again. Safe to
// call more than once.
func (h *TransferHost) Close(ctx context.Context) error {
	h.endLife() // cuts every step and handler short: what is left is stopped, not drained
	r := h.ref.Load()
	if r == nil {
		return nil
	}
	var errs []error
	if err := h.request(ctx, actors.CloseRole{}); err != nil && !errors.Is(err, errActorGone) {
		errs = append(errs, err)
	}
	if h.poisoned.CompareAndSwap(false, true) {
		r.eng.Poison(r.pid) // waited for below: a second poison never completes (hollywood v1.0.5)
	}
	wait := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("transfer host %s: %s: %w", h.prefix, what, err))
		}
	}
	select {
	case <-h.actorDone.Done():
	case <-ctx.Done():
		wait("its actor did not stop", ctx.Err())
	}
	_, err := h.sessionActors.Wait(ctx, func(n int) bool { return n == 0 })
	wait("session actors did not stop", err)
	wait("broker steps", h.steps.Wait(ctx))
	wait("handlers", h.work.Wait(ctx))
	return errors.Join(errs...)
}

// request sends the host actor a role command (Serve, StopAccepting, Stop or
// CloseRole) and waits for its answer, for ctx to end, or for the actor to stop.
func (h *TransferHost) request(ctx context.Context, msg any) error {
	tell := func(ask actors.RoleAsk) { h.tell(ask) }
	err := actors.AskRole(ctx, tell, msg, h.actorDone.Done())
	switch {
	case errors.Is(err, actors.ErrMemberGone):
		return fmt.Errorf("transfer host %s: %s: %w", h.prefix, roleName(msg), errActorGone)
	case err != nil && ctx.Err() != nil && errors.Is(err, context.Cause(ctx)):
		return fmt.Errorf("transfer host %s: %s: %w", h.prefix, roleName(msg), ctx.Err())
	}
	return err
}

// roleName names a role command for an error message.
func roleName(msg any) string { return (&actors.RoleCommand{Msg: msg}).Name() }
