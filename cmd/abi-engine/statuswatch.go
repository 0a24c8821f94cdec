package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// watchLease is status --watch: one line per change of the lease's holder (a take, a
// release, a hand-off, an eviction) or of the epoch, like kubectl get -w, until ctx
// ends. Renewals move the revision only and print nothing. Each line has the event, the
// lease revision, the epoch and its state, the age (how long the holder has held the
// lease, as far as the watch has seen; for the first line, since its record last
// changed) and the holder. With asJSON each line is a JSON object instead.
//
// On an account where no engine has run yet there is no bucket to watch: it says so
// on notice and waits for the bucket, as kubectl -w waits for a resource.
func watchLease(ctx context.Context, nc *nats.Conn, domain string, out, notice io.Writer, url string, asJSON bool) error {
	kv, err := waitForBucket(ctx, nc, domain, func() {
		fmt.Fprintf(notice, "no engine has ever held the lease on %s (bucket %s does not exist): waiting for one\n", url, jetstreamstore.DefaultBucket)
	})
	if err != nil || kv == nil {
		return err
	}
	// One watcher of both keys: the stream's order is kept between them, so a release's
	// draining mark is always seen before its delete, which tells it from an eviction.
	kw, err := kv.WatchFiltered(ctx, []string{jetstreamstore.Key, jetstreamstore.EpochKey})
	if err != nil {
		return fmt.Errorf("watch the engine lease: %w", err)
	}
	defer kw.Stop() //nolint:errcheck // ends with the command

	v := &leaseView{out: out, json: asJSON}
	if !asJSON {
		fmt.Fprintf(out, "%-20s %-11s %-9s %-14s %-10s %s\n", "TIME", "EVENT", "REVISION", "EPOCH", "AGE", "HOLDER")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-kw.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the watch of the engine lease ended")
			}
			if err := v.on(e, time.Now()); err != nil {
				return err
			}
		}
	}
}

// bucketPoll is how often waitForBucket looks again when it cannot be told: the
// stream-created advisory is the fast path, this the fallback for a user who may not
// subscribe to advisories.
const bucketPoll = 5 * time.Second

// waitForBucket returns the lease bucket, waiting for it to be created (calling waiting
// once) when it does not exist; nil without an error when ctx ends first.
func waitForBucket(ctx context.Context, nc *nats.Conn, domain string, waiting func()) (jetstream.KeyValue, error) {
	js, err := jsdomain.New(nc, domain)
	if err != nil {
		return nil, err
	}
	// Subscribed before the first look, so a bucket created between the two is not
	// missed. Without the permission the subscription is refused asynchronously and
	// only the poll remains.
	created := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe("$JS.EVENT.ADVISORY.STREAM.CREATED.KV_"+jetstreamstore.DefaultBucket, created)
	if err == nil {
		defer sub.Unsubscribe() //nolint:errcheck // ends with the wait
	}
	tick := time.NewTicker(bucketPoll)
	defer tick.Stop()
	for said := false; ; {
		kv, err := js.KeyValue(ctx, jetstreamstore.DefaultBucket)
		switch {
		case err == nil:
			return kv, nil
		case ctx.Err() != nil:
			return nil, nil
		case !errors.Is(err, jetstream.ErrBucketNotFound):
			return nil, fmt.Errorf("open the lease bucket %s: %w", jetstreamstore.DefaultBucket, err)
		case !said:
			said = true
			waiting()
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-created:
		case <-tick.C:
		}
	}
}

// leaseView is what the watch has seen, to print only changes.
type leaseView struct {
	out     io.Writer
	json    bool
	started bool // the initial values were printed
	// The lease: holder is nil while it is free; handoff is the released-to form's
	// target, when the holder released to a successor.
	holder  *lease.Holder
	handoff string
	rev     uint64
	since   time.Time // when the holder took the lease, as far as we know
	// The epoch record (Revision 0: none) or why its value is not one.
	epoch    lease.EpochRecord
	epochErr error
}

// on takes one update of either key; nil marks the end of the initial values.
func (v *leaseView) on(e jetstream.KeyValueEntry, now time.Time) error {
	switch {
	case e == nil:
		if v.started {
			return nil
		}
		v.started = true
		if v.rev == 0 {
			v.since = now // never held: the age counts from now
		}
		return v.print(now, "current")
	case e.Key() == jetstreamstore.EpochKey:
		return v.onEpoch(e, now)
	default:
		return v.onLease(e, now)
	}
}

func (v *leaseView) onLease(e jetstream.KeyValueEntry, now time.Time) error {
	prevHolder, prevHandoff := v.holder, v.handoff
	v.rev = e.Revision()
	var event string
	if e.Operation() == jetstream.KeyValuePut {
		h := lease.DecodeHolder(e.Value())
		v.holder, v.handoff, event = &h, "", "acquired"
		if t, ok := h.Handoff(); ok {
			v.handoff, event = t.String(), "handed-off"
		}
		if v.started && prevHolder != nil && *prevHolder == h {
			return nil // a renewal
		}
	} else {
		v.holder, v.handoff, event = nil, "", "released"
		if prevHolder == nil {
			if !v.started {
				v.since = e.Created() // released before the watch began
			}
			return nil // already free
		}
		// A holder releases only after marking its epoch draining (or before it has
		// one); a delete while the record says it still serves was someone else's.
		if prevHandoff == "" && v.epochErr == nil && v.epoch.State == lease.EpochServing && v.epoch.InstanceID == prevHolder.InstanceID {
			event = "evicted"
		} else if e.Operation() == jetstream.KeyValuePurge {
			event = "purged"
		}
	}
	if !v.started {
		v.since = e.Created()
		return nil
	}
	v.since = now
	return v.print(now, event)
}

func (v *leaseView) onEpoch(e jetstream.KeyValueEntry, now time.Time) error {
	var rec lease.EpochRecord
	var err error
	if e.Operation() == jetstream.KeyValuePut {
		rec, err = lease.DecodeEpoch(e.Value())
		rec.Revision = e.Revision()
	}
	prev, prevErr := v.epoch, v.epochErr
	v.epoch, v.epochErr = rec, err
	if !v.started {
		return nil
	}
	var event string
	switch {
	case err != nil:
		event = "epoch-bad"
	case rec.None():
		if prev.None() && prevErr == nil {
			return nil
		}
		event = "epoch-gone"
	case prevErr == nil && rec.Epoch == prev.Epoch && rec.State == prev.State && rec.InstanceID == prev.InstanceID:
		return nil // written again unchanged
	case rec.Epoch != prev.Epoch:
		event = "new-epoch"
	default:
		event = rec.State.String() // draining, drained
	}
	return v.print(now, event)
}

func (v *leaseView) print(now time.Time, event string) error {
	if v.json {
		return v.printJSON(now, event)
	}
	ep := "none"
	switch {
	case v.epochErr != nil:
		ep = "unreadable"
	case !v.epoch.None():
		ep = fmt.Sprintf("%d %s", v.epoch.Epoch, v.epoch.State)
	}
	_, err := fmt.Fprintf(v.out, "%-20s %-11s %-9d %-14s %-10s %s\n", now.UTC().Format(time.RFC3339), event, v.rev, ep, since(now, v.since), v.describeHolder())
	return err
}

// describeHolder is the holder column: last, so a long rollout id misaligns nothing.
func (v *leaseView) describeHolder() string {
	switch {
	case v.holder == nil && v.rev == 0:
		return "free (never held)"
	case v.holder == nil:
		return "free"
	case v.handoff != "":
		return "released to " + v.handoff + " by " + v.holder.InstanceID
	}
	return describe(*v.holder)
}

// watchJSON is one line of status --watch --json.
type watchJSON struct {
	Time        string        `json:"time"`
	Event       string        `json:"event"`
	Revision    uint64        `json:"revision"`
	Free        bool          `json:"free"`
	Holder      *lease.Holder `json:"holder"`
	ReleasedTo  string        `json:"released_to,omitempty"`
	HeldSeconds float64       `json:"held_seconds"`
	// Epoch is the epoch record, null while there is none; EpochError says why a value
	// in the key could not be read as one.
	Epoch      *epochStatusJSON `json:"epoch"`
	EpochError string           `json:"epoch_error,omitempty"`
}

func (v *leaseView) printJSON(now time.Time, event string) error {
	line := watchJSON{
		Time: now.UTC().Format(time.RFC3339), Event: event, Revision: v.rev,
		Free: v.holder == nil, Holder: v.holder, ReleasedTo: v.handoff,
		HeldSeconds: since(now, v.since).Seconds(),
	}
	switch {
	case v.epochErr != nil:
		line.EpochError = v.epochErr.Error()
	case !v.epoch.None():
		line.Epoch = &epochStatusJSON{Epoch: v.epoch.Epoch, InstanceID: v.epoch.InstanceID,
			State: v.epoch.State.String(), Revision: v.epoch.Revision}
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = v.out.Write(append(b, '\n'))
	return err
}

// describe is a holder in one column: its instance id and rollout.
func describe(h lease.Holder) string {
	if !h.Known() {
		return "unknown (not an abi-engine record)"
	}
	return fmt.Sprintf("%s (rollout %s)", h.InstanceID, orNone(h.RolloutID))
}
