package jetstreamstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go/jetstream"
)

// A value in the epoch key that is not an epoch record is an error naming the value
// and what is wrong, never a guess at the epoch, and never a conflict (which would say
// "surely not written" of a write that was never tried).
func TestForeignEpochValueIsAnError(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, natstest.Connect(t, srv.URL()), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct{ value, reason string }{
		{`not json`, "not a JSON object"},
		{`{"epoch": 0, "instance_id": "x", "state": "serving"}`, "epoch is not a positive integer"},
		{`{"epoch": 2.5, "instance_id": "x", "state": "serving"}`, "epoch is not a positive integer"},
		{`{"epoch": 3, "state": "serving"}`, "instance_id is not a non-empty string"},
		{`{"epoch": 3, "instance_id": "x", "state": "resting"}`, `state "resting" is none of`},
	} {
		if _, err := s.PutEpochValue(ctx, []byte(c.value)); err != nil {
			t.Fatal(err)
		}
		_, err := s.ReadEpoch(ctx)
		var ve *lease.EpochValueError
		if !errors.As(err, &ve) || !errors.Is(err, lease.ErrEpochValue) || errors.Is(err, lease.ErrConflict) {
			t.Fatalf("ReadEpoch of %s = %v, want an *EpochValueError", c.value, err)
		}
		if msg := err.Error(); !strings.Contains(msg, c.reason) || !strings.Contains(msg, jetstreamstore.EpochKey) {
			t.Errorf("ReadEpoch of %s: %q does not say %q of key %s", c.value, msg, c.reason, jetstreamstore.EpochKey)
		}
	}
	// Compare-and-swap still works over it, at its revision.
	rev, err := s.PutEpochValue(ctx, []byte("junk"))
	if err != nil {
		t.Fatal(err)
	}
	want := lease.EpochRecord{Epoch: 4, InstanceID: "engine-me", State: lease.EpochServing}
	next, err := s.WriteEpoch(ctx, want, rev)
	if err != nil {
		t.Fatalf("write over a foreign value at its revision: %v", err)
	}
	if got, err := s.ReadEpoch(ctx); err != nil || got.Revision != next || got.Epoch != 4 {
		t.Fatalf("ReadEpoch = %v, %v", got, err)
	}
}

// A deleted epoch key reads as no record, a write at revision 0 creates it again, and
// the watch reports the delete as its revision only.
func TestDeletedEpochKeyReadsAsNone(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	s := open(t, nc, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec := lease.EpochRecord{Epoch: 1, InstanceID: "engine-me", State: lease.EpochServing}
	rev, err := s.WriteEpoch(ctx, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.WatchEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := <-w.Updates(); e.Revision != rev || e.Epoch != 1 {
		t.Fatalf("watch delivered %v first, want the record at %d", e, rev)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var bucket string
	for n := range js.KeyValueStoreNames(ctx).Name() {
		bucket = n
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, jetstreamstore.EpochKey); err != nil {
		t.Fatal(err)
	}
	if e := <-w.Updates(); e.Revision <= rev || e.Epoch != 0 {
		t.Fatalf("watch delivered %v for the delete, want its revision only", e)
	}
	if e, err := s.ReadEpoch(ctx); err != nil || !e.None() {
		t.Fatalf("ReadEpoch after the delete = %v, %v; want none", e, err)
	}
	if _, err := s.WriteEpoch(ctx, rec, 0); err != nil {
		t.Fatalf("create over the delete marker: %v", err)
	}
}

// A recreated lease bucket starts empty: no lease, no epoch (docs/architecture.md,
// "Epoch": the next holder starts again from its own epoch, or 1).
func TestRecreatedBucketStartsWithoutAnEpoch(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	s := open(t, nc, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.WriteEpoch(ctx, lease.EpochRecord{Epoch: 7, InstanceID: "engine-me", State: lease.EpochServing}, 0); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var bucket string
	for n := range js.KeyValueStoreNames(ctx).Name() {
		bucket = n
	}
	if err := js.DeleteKeyValue(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := s.ReadEpoch(ctx)
		if err == nil {
			t.Fatal("ReadEpoch on a deleted bucket succeeded")
		}
		if strings.Contains(err.Error(), "recreated it") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the bucket was never recreated; last: %v", err)
		}
	}
	if e, err := s.ReadEpoch(ctx); err != nil || !e.None() {
		t.Fatalf("ReadEpoch on the recreated bucket = %v, %v; want none", e, err)
	}
}
