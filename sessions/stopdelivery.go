package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// confirmTimeout bounds the broker round trip of StopDelivery when the caller's context
// has no deadline of its own (nats.go's own Flush uses the same bound).
const confirmTimeout = 10 * time.Second

// closedCheckInterval is how often Drain.Wait looks whether the connection was closed
// under it: a closed connection ends delivery but tells its subscriptions nothing. It
// matches the interval at which nats.go itself polls a draining subscription.
const closedCheckInterval = 100 * time.Millisecond

// Drain is the delivery of subscriptions that StopDelivery ended at the broker: the
// messages the broker routed to them before it processed the UNSUB, still being handled.
type Drain struct {
	nc     *nats.Conn
	subs   []*nats.Subscription
	closed []<-chan nats.SubStatus
}

// StopDelivery ends subs, all on nc, at the broker without losing a message the broker
// already routed to them, and returns once the broker has confirmed it.
//
// It drains each subscription (Subscription.Drain, never Unsubscribe, which drops what
// is pending in the client), which writes the UNSUB, and then makes a round trip to the
// broker after the UNSUB was written. Once that round trip returns the broker has
// processed the UNSUB: nothing new reaches these subscriptions, and everything it had
// routed to them is already in their pending queues, where their callbacks keep
// handling it. Drain.Wait waits for those callbacks.
//
// The returned Drain is never nil, so a caller can still wait on what was received
// when the confirmation failed (the error says which subscriptions were not confirmed).
// If the connection is reconnecting, it waits for the connection first (nats.go would
// hold the UNSUB back, and the broker keep the subscription); if ctx ends before the
// connection is back, nothing is drained and the error says so.
func StopDelivery(ctx context.Context, nc *nats.Conn, subs ...*nats.Subscription) (*Drain, error) {
	d := newDrain(nc, subs)
	err := d.begin(ctx)
	if cerr := d.confirm(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return d, err
}

// newDrain is the Drain of subs, not begun. It registers the listeners of their
// closing before anything drains, so a subscription that drains at once is not missed;
// it does no I/O, so an actor may call it.
func newDrain(nc *nats.Conn, subs []*nats.Subscription) *Drain {
	d := &Drain{nc: nc}
	for _, s := range subs {
		if s == nil {
			continue
		}
		d.subs = append(d.subs, s)
		d.closed = append(d.closed, s.StatusChanged(nats.SubscriptionClosed))
	}
	return d
}

// begin writes the UNSUBs of the subscriptions not yet draining, once the connection
// is up. If ctx ends first it drains nothing: a drain while reconnecting leaves the
// subscription at the broker (WaitConnected says why), while one still subscribed can
// be ended safely later, by Unsubscribe or another begin.
func (d *Drain) begin(ctx context.Context) error {
	if err := WaitConnected(ctx, d.nc); err != nil {
		return fmt.Errorf("the connection is not up, so %s still deliver: %w", d.subjects(), err)
	}
	var errs []error
	for _, s := range d.subs {
		if !s.IsValid() || s.IsDraining() {
			continue
		}
		if err := s.Drain(); err != nil && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, fmt.Errorf("drain subscription %s: %w", s.Subject, err))
		}
	}
	return errors.Join(errs...)
}

// confirm makes the round trip that proves the broker processed the UNSUBs written
// before it.
func (d *Drain) confirm(ctx context.Context) error {
	if len(d.subs) == 0 {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, confirmTimeout)
		defer cancel()
	}
	for {
		err := d.nc.FlushWithContext(ctx)
		if err == nil {
			return nil
		}
		if d.nc.IsClosed() || ctx.Err() != nil {
			return fmt.Errorf("the broker did not confirm the UNSUB of %s: %w", d.subjects(), err)
		}
		// The connection broke before the broker answered: the UNSUB may have gone with
		// it, and a subscription the client still holds is sent again on reconnect.
		// End those again once the connection is back, and confirm again.
		if werr := WaitConnected(ctx, d.nc); werr != nil {
			return fmt.Errorf("the broker did not confirm the UNSUB of %s: %w (then %w)", d.subjects(), err, werr)
		}
		for _, s := range d.subs {
			if s.IsValid() {
				_ = s.Drain()
			}
		}
	}
}

// Finished reports whether every subscription has handled everything it received (or
// its connection is closed, which ends delivery too).
func (d *Drain) Finished() bool {
	if d.nc.IsClosed() {
		return true
	}
	for _, s := range d.subs {
		if s.IsValid() {
			return false
		}
	}
	return true
}

// Wait returns once every callback for a message delivered before the UNSUB has
// returned, or with ctx's error.
func (d *Drain) Wait(ctx context.Context) error {
	var tick *time.Ticker
	for i, ch := range d.closed {
		for d.subs[i].IsValid() && !d.nc.IsClosed() {
			if tick == nil {
				tick = time.NewTicker(closedCheckInterval)
				defer tick.Stop()
			}
			select {
			case _, ok := <-ch:
				if !ok {
					ch = nil // closed: IsValid is false now
				}
			case <-tick.C:
			case <-ctx.Done():
				return fmt.Errorf("subscription %s still handling received messages: %w", d.subs[i].Subject, ctx.Err())
			}
		}
	}
	return nil
}

func (d *Drain) subjects() string {
	names := make([]string, len(d.subs))
	for i, s := range d.subs {
		names[i] = s.Subject
	}
	return strings.Join(names, ", ")
}
