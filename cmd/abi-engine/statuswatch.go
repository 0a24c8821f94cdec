package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// watchLease is status --watch: one line per change of the lease's holder (a take, a
// release, a hand-off, an eviction) or of the epoch, like kubectl get -w, until ctx
// ends. Renewals move the revision only and print nothing. Each line has the holder,
// the revision, the epoch and the age: how long the holder has held the lease, as far
// as the watch has seen (for the first line, since its record last changed).
func watchLease(ctx context.Context, nc *nats.Conn, domain string, w io.Writer) error {
	kv, err := leaseKV(ctx, nc, domain)
	if err != nil {
		return err
	}
	lw, err := kv.Watch(ctx, jetstreamstore.Key)
	if err != nil {
		return fmt.Errorf("watch the engine lease: %w", err)
	}
	defer lw.Stop() //nolint:errcheck // ends with the command
	ew, err := kv.Watch(ctx, jetstreamstore.EpochKey)
	if err != nil {
		return fmt.Errorf("watch the engine epoch: %w", err)
	}
	defer ew.Stop() //nolint:errcheck // ends with the command

	fmt.Fprintf(w, "%-20s %-12s %-44s %-9s %-20s %s\n", "TIME", "EVENT", "HOLDER", "REVISION", "EPOCH", "AGE")
	v := leaseView{out: w}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-lw.Updates():
			if !ok {
				return fmt.Errorf("the watch of the engine lease ended")
			}
			v.onLease(e, time.Now())
		case e, ok := <-ew.Updates():
			if !ok {
				return fmt.Errorf("the watch of the engine epoch ended")
			}
			v.onEpoch(e, time.Now())
		}
	}
}

// leaseView is what the watch has seen, to print only changes.
type leaseView struct {
	out      io.Writer
	started  bool   // the lease's initial value (or its absence) was printed
	holder   string // the holder's key: instance id, "free", or the released-to form
	rev      uint64
	since    time.Time // when the holder took the lease, as far as we know
	epoch    lease.EpochRecord
	epochErr error
}

func (v *leaseView) onLease(e jetstream.KeyValueEntry, now time.Time) {
	if e == nil { // the initial values are over
		if !v.started {
			v.started = true
			v.holder, v.since = "free", now
			v.print(now, "free", "free (never held)")
		}
		return
	}
	key, what, event := "free", "free", "released"
	if e.Operation() == jetstream.KeyValuePut {
		h := lease.DecodeHolder(e.Value())
		key, what, event = h.InstanceID, describe(h), "acquired"
		if t, ok := h.Handoff(); ok {
			key, what, event = h.RolloutID, "released to "+t.String(), "handed-off"
		}
	} else if e.Operation() == jetstream.KeyValuePurge {
		event = "purged"
	}
	v.rev = e.Revision()
	if v.started && key == v.holder {
		return // a renewal
	}
	if !v.started {
		v.started, event = true, "current"
		v.since = e.Created()
	} else {
		v.since = now
	}
	v.holder = key
	v.print(now, event, what)
}

func (v *leaseView) onEpoch(e jetstream.KeyValueEntry, now time.Time) {
	if e == nil {
		return
	}
	var rec lease.EpochRecord
	var err error
	if e.Operation() == jetstream.KeyValuePut {
		rec, err = lease.DecodeEpoch(e.Value())
	}
	if rec.Epoch == v.epoch.Epoch && rec.State == v.epoch.State && rec.InstanceID == v.epoch.InstanceID && (err == nil) == (v.epochErr == nil) {
		return
	}
	v.epoch, v.epochErr = rec, err
	if v.started {
		v.print(now, "epoch", v.describeHolder())
	}
}

// describeHolder is the holder column for an epoch line: the holder as last printed.
func (v *leaseView) describeHolder() string {
	if v.holder == "" {
		return "free"
	}
	return v.holder
}

func (v *leaseView) print(now time.Time, event, holder string) {
	ep := "none"
	switch {
	case v.epochErr != nil:
		ep = "unreadable"
	case !v.epoch.None():
		ep = fmt.Sprintf("%d %s", v.epoch.Epoch, v.epoch.State)
	}
	fmt.Fprintf(v.out, "%-20s %-12s %-44s %-9d %-20s %s\n", now.UTC().Format(time.RFC3339), event, holder, v.rev, ep, since(now, v.since))
}

// describe is a holder in one column: its instance id and rollout.
func describe(h lease.Holder) string {
	if !h.Known() {
		return "unknown (not an abi-engine record)"
	}
	return fmt.Sprintf("%s (rollout %s)", h.InstanceID, orNone(h.RolloutID))
}
