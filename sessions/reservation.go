package sessions

import (
	"sync/atomic"

	"github.com/abi-engine/engine/protocol"
)

// Reservation is bytes taken from a Budget for one call ahead of what will fill them:
// a get_object reserves what its read and its encoded reply hold at once before it
// reads the object, so calls beyond the budget are refused having read nothing. The
// call gives them back with Release once its reply is sent or failed; a reply parked
// on the overflow host (ReplyHeld) hands them to the parked session instead, which
// keeps what the reply holds and gives the rest back at once. Whatever happens, the
// bytes go back exactly once: Release after a park, or twice, gives back nothing.
type Reservation struct {
	budget *Budget
	client string
	held   atomic.Int64
}

// Held is what the reservation holds now (0 once released or handed to a session).
func (r *Reservation) Held() int64 {
	if r == nil {
		return 0
	}
	return r.held.Load()
}

// Release gives back what the reservation still holds. Safe on nil, more than once,
// and after a parked session took the bytes.
func (r *Reservation) Release() {
	if r == nil {
		return
	}
	r.budget.give(r.client, r.held.Swap(0))
}

// detach hands what the reservation holds to its new holder, which gives it back.
func (r *Reservation) detach() int64 {
	if r == nil {
		return 0
	}
	return r.held.Swap(0)
}

// Reserve takes hold bytes of the budget for a call of client whose reply of reply
// bytes will be parked (ReplyHeld) once hold bytes were read and encoded. A call that
// can never fit is refused PAYLOAD_TOO_LARGE (the reply above the overflow limit, or
// hold above the client's share or the budget: read it by transfer instead); one that
// does not fit now RESOURCE_EXHAUSTED, retryable, as the budget refuses a transfer's
// bytes; one while the host parks nothing (not serving) UNAVAILABLE, retryable. The
// messages name the limit; the caller names what it was about to read.
func (o *OverflowHost) Reserve(client string, hold, reply int64) (*Reservation, error) {
	b := o.cfg.Budget
	switch {
	case !o.view.Load().serving || o.actorDone.Err() != nil:
		return nil, protocol.Refused("the overflow host %s, which would park its reply, is not serving; retry", o.owner)
	case reply > o.cfg.MaxSessionBytes:
		return nil, protocol.Errorf(protocol.PayloadTooLarge,
			"its reply of %d bytes would be above the overflow limit of %d (limits.session_memory_mib); read it by transfer", reply, o.cfg.MaxSessionBytes)
	case hold > b.PerClient():
		return nil, protocol.Errorf(protocol.PayloadTooLarge,
			"reading it and encoding its reply of %d bytes holds %d bytes at once, above a client's share of %d of the engine's memory budget (limits.client_memory_mib); read it by transfer",
			reply, hold, b.PerClient())
	}
	if err := b.take(client, hold); err != nil {
		return nil, err
	}
	r := &Reservation{budget: b, client: client}
	r.held.Store(hold)
	return r, nil
}

// adopt makes a parked session of n bytes the holder of held's bytes: what held
// reserved beyond n goes back to the budget, what it lacks is taken (and refused as
// the budget refuses). Nothing is left with held either way; on an error nothing is
// taken for the session.
func (a *hostActor) adopt(e *entry, n int64, held *Reservation) error {
	h := a.h
	if limit, key := h.uploadLimit(e.op); n > limit {
		return protocol.Errorf(protocol.PayloadTooLarge, "transfer session %s would hold %d bytes, above the limit of %d per session (%s)", e.id, n, limit, key)
	}
	got := held.detach()
	if held.client != e.client { // never in the engine: both are the request's reply subject's
		h.cfg.Budget.give(held.client, got)
		got = 0
	}
	switch {
	case got >= n:
		h.cfg.Budget.give(e.client, got-n)
	default:
		if err := h.cfg.Budget.take(e.client, n-got); err != nil {
			h.cfg.Budget.give(e.client, got)
			return err
		}
	}
	return nil
}
