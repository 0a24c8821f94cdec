package jetstreamstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/lease/leasetest"
)

// Issue 26 finding 3: a holder paused while its lease bucket is deleted and recreated
// resumes with a revision read in the old bucket. The successor's revisions in the new
// bucket start again at 1 and pass through that number; a compare-and-swap that matched
// it took the lease back from the successor. Here, with buckets created by hand (as an
// operator or the Python engines do: sequences from 1), the successor's record is
// driven to exactly the old holder's revision, and the old holder's renewal at it must
// be refused as a conflict of incarnation; its delete too; and a read binds the new
// bucket, so the holder sees the successor (and would end as lost). Without the
// incarnation check (plain KV compare-and-swaps) the renewal committed over the
// successor's record.
func TestARecreatedBucketIsANewBucket(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := jetstreamstore.Config{Bucket: fmt.Sprintf("ABI_ENGINE_T%d", bucketSeq.Add(1))}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	byHand := func() {
		t.Helper()
		if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cfg.Bucket, History: 1, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
	}
	byHand()
	old, err := jetstreamstore.Open(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !old.Checked() || old.EngineCreated() {
		t.Fatalf("a bucket created by hand on a broker with atomic batches: checked %v, engine-created %v; want checked", old.Checked(), old.EngineCreated())
	}
	a, b := leasetest.Holder("old", ""), leasetest.Holder("successor", "")
	rev, err := old.Create(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if rev, err = old.Update(ctx, a, rev); err != nil {
			t.Fatal(err)
		}
	}

	if err := js.DeleteKeyValue(ctx, cfg.Bucket); err != nil {
		t.Fatal(err)
	}
	byHand()
	successor, err := jetstreamstore.Open(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := successor.Read(ctx)
	if err != nil || !got.Free() {
		t.Fatalf("the recreated bucket: %v, %v; want free", got, err)
	}
	srev, err := successor.Create(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// Drive the successor's record to the old holder's revision: learn how many
	// messages a renewal adds, then publish periods (one message each) until the next
	// renewal lands exactly there.
	st, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	last := func() uint64 {
		t.Helper()
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	before := last()
	if srev, err = successor.Update(ctx, b, srev); err != nil {
		t.Fatal(err)
	}
	step := srev - before
	for last()+step < rev {
		if err := successor.Publish(ctx, lease.Period{}); err != nil {
			t.Fatal(err)
		}
	}
	if srev, err = successor.Update(ctx, b, srev); err != nil || srev != rev {
		t.Fatalf("the successor's renewal landed at %d (%v), want the old revision %d", srev, err, rev)
	}

	if _, err := old.Update(ctx, a, rev); !errors.Is(err, lease.ErrIncarnation) || !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("the old holder's renewal at revision %d, the successor's revision in the new bucket = %v, want a conflict of incarnation", rev, err)
	}
	if err := old.Delete(ctx, rev); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("the old holder's delete at revision %d = %v, want a conflict", rev, err)
	}
	if got, err := successor.Read(ctx); err != nil || got.Holder != b || got.Revision != srev {
		t.Fatalf("the successor's record after the old holder's writes: %v, %v; want its own at %d", got, err, srev)
	}
	got, err = old.Read(ctx)
	if err != nil || got.Holder != b {
		t.Fatalf("the old holder reads %v, %v; want the successor's record", got, err)
	}
	// Bound to the new bucket by that read, the old holder's writes are judged by their
	// revision again: the successor's is not its own to renew.
	if _, err := old.Update(ctx, a, got.Revision+1); !errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrIncarnation) {
		t.Fatalf("a renewal at a wrong revision in the bound bucket = %v, want a plain conflict", err)
	}
}

// A lease bucket the engine creates starts its sequences far from 1, at a point of its
// own: a successor's revisions in a bucket an engine recreated are nowhere near the old
// holder's, so its plain compare-and-swap cannot match, and no write pays for a batch.
func TestAnEngineCreatedBucketHasRevisionsOfItsOwn(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := jetstreamstore.Config{Bucket: fmt.Sprintf("ABI_ENGINE_T%d", bucketSeq.Add(1))}
	old, err := jetstreamstore.Open(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !old.EngineCreated() || old.Checked() {
		t.Fatalf("a bucket the engine created: engine-created %v, checked %v; want engine-created, unbatched", old.EngineCreated(), old.Checked())
	}
	a, b := leasetest.Holder("old", ""), leasetest.Holder("successor", "")
	rev, err := old.Create(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if rev < 1<<40 {
		t.Fatalf("the first revision in a bucket the engine created is %d, want at least 2^40", rev)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, cfg.Bucket); err != nil {
		t.Fatal(err)
	}
	successor, err := jetstreamstore.Open(ctx, nc, cfg) // creates the bucket again
	if err != nil {
		t.Fatal(err)
	}
	srev, err := successor.Create(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if srev == rev {
		t.Fatalf("the recreated bucket gave the successor the old holder's revision %d", rev)
	}
	if _, err := old.Update(ctx, a, rev); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("the old holder's renewal in the recreated bucket = %v, want a conflict", err)
	}
	if got, err := old.Read(ctx); err != nil || got.Holder != b || got.Revision != srev {
		t.Fatalf("the old holder reads %v, %v; want the successor's record at %d", got, err, srev)
	}
}
