package jsepoch

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func stream(t *testing.T, ctx context.Context, j js.JetStream) {
	t.Helper()
	if _, err := j.CreateStream(ctx, js.StreamConfig{
		Name: "S", Subjects: []string{"s.>"}, Storage: js.MemoryStorage,
		AllowRollup: true, AllowAtomicPublish: true,
	}); err != nil {
		t.Fatal(err)
	}
}

// write publishes a message under rec's check.
func write(ctx context.Context, j js.JetStream, r *Record, rec epoch.Record) error {
	return writeOn(ctx, j, r, rec, "s.data")
}

// writeOn publishes a message on subject under rec's check.
func writeOn(ctx context.Context, j js.JetStream, r *Record, rec epoch.Record, subject string) error {
	m := &nats.Msg{Subject: subject, Data: []byte("x")}
	r.Check(m, rec)
	_, err := j.PublishMsg(ctx, m)
	return err
}

// A stream deleted and recreated starts its sequences at 1 again, so a stale engine's
// revision can be the new record's: one check subject per epoch keeps it refused.
// (With a single record whose revision writes expect, the stale write committed.)
func TestRecreatedStreamReusesSequences(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream(t, ctx, j)
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, stale); err != nil {
		t.Fatalf("a write under the current epoch: %v", err)
	}
	if err := j.DeleteStream(ctx, "S"); err != nil {
		t.Fatal(err)
	}
	stream(t, ctx, j)
	cur, err := epoch.Adopt(ctx, r, "S", 2)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Rev != stale.Rev {
		t.Fatalf("the recreated stream gave the record revision %d, the stale one had %d: the test needs them equal", cur.Rev, stale.Rev)
	}
	if err := write(ctx, j, r, stale); !jserr.IsConflict(err) {
		t.Fatalf("a write under the stale epoch, same revision = %v, want refused (10071)", err)
	}
	if err := write(ctx, j, r, cur); err != nil {
		t.Fatalf("a write under the current epoch: %v", err)
	}
}

// Each adoption marks the superseded epoch's check subject; a store that adopted none
// expects no record at all.
func TestChecks(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream(t, ctx, j)
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, epoch.Record{}); err != nil {
		t.Fatalf("a write under no epoch while the store has none: %v", err)
	}
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, epoch.Record{}); !jserr.IsConflict(err) {
		t.Fatalf("a write under no epoch while the store has 1 = %v, want refused", err)
	}
	two, err := epoch.Adopt(ctx, r, "S", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, one); !jserr.IsConflict(err) {
		t.Fatalf("a write under 1 after 2 = %v, want refused", err)
	}
	if got, err := r.ReadEpoch(ctx); err != nil || got != two {
		t.Fatalf("ReadEpoch = %+v, %v; want %+v", got, err, two)
	}
	// An adopter that read 1 before 2 was adopted finds 1's subject marked.
	if _, err := r.WriteEpoch(ctx, 3, one); !errors.Is(err, epoch.ErrMoved) {
		t.Fatalf("WriteEpoch over a superseded record = %v, want ErrMoved", err)
	}
	if _, err := r.WriteEpoch(ctx, 3, epoch.Record{}); !errors.Is(err, epoch.ErrMoved) {
		t.Fatalf("WriteEpoch over none while the store has 2 = %v, want ErrMoved", err)
	}
	if err := write(ctx, j, r, two); err != nil {
		t.Fatalf("a write under 2: %v", err)
	}
}

// put publishes data on subject with the headers given in pairs, and returns its
// sequence: the steps of an advance written by hand, as an adopter that stopped
// between them left them.
func put(t *testing.T, ctx context.Context, j js.JetStream, subject, data string, kv ...string) uint64 {
	t.Helper()
	m := &nats.Msg{Subject: subject, Data: []byte(data), Header: nats.Header{js.MsgRollup: []string{js.MsgRollupSubject}}}
	for i := 0; i < len(kv); i += 2 {
		m.Header.Set(kv[i], kv[i+1])
	}
	ack, err := j.PublishMsg(ctx, m)
	if err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
	return ack.Sequence
}

func newRecord(t *testing.T) (context.Context, js.JetStream, *Record) {
	t.Helper()
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	stream(t, ctx, j)
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, j, r
}

// An adopter that stopped after marking the old epoch (step 1 of advance) left writes
// under no epoch able to commit; a reader completes the advance it won, and the record
// it returns carries writes. (Before, ReadEpoch took the marker for a record moving
// under it and gave up after five reads.)
func TestAdvanceStoppedAfterTheMarker(t *testing.T) {
	ctx, j, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	// Marked as advance marks it; its shards were not marked yet, so writes under 1
	// still commit, as they do until the shards' markers stand.
	put(t, ctx, j, "s.epoch.1", "", supersededBy, "2", shardsHeader, strconv.Itoa(Shards))
	if err := write(ctx, j, r, one); err != nil {
		t.Fatalf("a write under 1 before its shards are marked = %v, want stored", err)
	}
	got, err := r.ReadEpoch(ctx)
	if err != nil || got.Epoch != 2 || got.Rev == 0 {
		t.Fatalf("ReadEpoch = %+v, %v; want epoch 2 with the revision of its check", got, err)
	}
	for _, k := range []string{"s.data", "s.other", "s.k.123"} {
		if err := writeOn(ctx, j, r, one, k); !jserr.IsConflict(err) {
			t.Fatalf("a write on %s under 1 once a reader went past it = %v, want refused", k, err)
		}
	}
	if err := write(ctx, j, r, got); err != nil {
		t.Fatalf("a write under the completed epoch 2: %v", err)
	}
	if again, err := r.ReadEpoch(ctx); err != nil || again != got {
		t.Fatalf("ReadEpoch again = %+v, %v; want %+v (completed once)", again, err, got)
	}
	three, err := epoch.Adopt(ctx, r, "S", 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, got); !jserr.IsConflict(err) {
		t.Fatalf("a write under 2 after 3 = %v, want refused", err)
	}
	if err := write(ctx, j, r, three); err != nil {
		t.Fatalf("a write under 3: %v", err)
	}
}

// An advance stopped before its last step (B still names the old epoch) is already in
// force: the record is the new epoch's, and the next advance goes on from it.
func TestAdvanceStoppedBeforeTheRecord(t *testing.T) {
	ctx, j, r := newRecord(t)
	if _, err := epoch.Adopt(ctx, r, "S", 1); err != nil {
		t.Fatal(err)
	}
	put(t, ctx, j, "s.epoch.1", "", supersededBy, "4")
	rev := put(t, ctx, j, "s.epoch.4", "4")
	four := epoch.Record{Epoch: 4, Rev: rev}
	if got, err := r.ReadEpoch(ctx); err != nil || got != four {
		t.Fatalf("ReadEpoch = %+v, %v; want %+v", got, err, four)
	}
	if got, err := epoch.Adopt(ctx, r, "S", 4); err != nil || got != four {
		t.Fatalf("Adopt 4 = %+v, %v; want %+v as it is", got, err, four)
	}
	if _, err := epoch.Adopt(ctx, r, "S", 3); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("Adopt 3 = %v, want ErrFenced", err)
	}
	five, err := epoch.Adopt(ctx, r, "S", 5)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := r.last(ctx, "s.epoch"); err != nil || string(m.Data) != "5" {
		t.Fatalf("B after the advance to 5 = %v, %v; want 5", m, err)
	}
	if err := write(ctx, j, r, four); !jserr.IsConflict(err) {
		t.Fatalf("a write under 4 after 5 = %v, want refused", err)
	}
	if err := write(ctx, j, r, five); err != nil {
		t.Fatalf("a write under 5: %v", err)
	}
}

// The last step of an advance that comes late, after its epoch was superseded, is
// refused: B never goes back to an epoch past.
func TestLateRecordWriteIsRefused(t *testing.T) {
	ctx, j, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := r.WriteEpoch(ctx, 2, one)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteEpoch(ctx, 3, two); err != nil {
		t.Fatal(err)
	}
	late := &nats.Msg{Subject: "s.epoch", Data: []byte("2"), Header: nats.Header{js.MsgRollup: []string{js.MsgRollupSubject}}}
	r.Check(late, two)
	if _, err := j.PublishMsg(ctx, late); !jserr.IsConflict(err) {
		t.Fatalf("a late record of 2 after 3 = %v, want refused", err)
	}
	if got, err := r.ReadEpoch(ctx); err != nil || got.Epoch != 3 {
		t.Fatalf("ReadEpoch = %+v, %v; want epoch 3", got, err)
	}
}

// Of adopters racing from one record, one advances; each other one is told ErrMoved
// at the step it lost, and the record is the winner's.
func TestAdvanceRace(t *testing.T) {
	ctx, _, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	const racers = 8
	errs := make(chan error, racers)
	won := make(chan epoch.Record, racers)
	for i := range racers {
		go func() {
			rec, err := r.WriteEpoch(ctx, uint64(2+i), one)
			if err == nil {
				won <- rec
			}
			errs <- err
		}()
	}
	var winners []epoch.Record
	for range racers {
		if err := <-errs; err != nil && !errors.Is(err, epoch.ErrMoved) {
			t.Fatalf("a racing advance: %v, want nil or ErrMoved", err)
		}
	}
	close(won)
	for rec := range won {
		winners = append(winners, rec)
	}
	if len(winners) != 1 {
		t.Fatalf("%d advances won, want 1: %+v", len(winners), winners)
	}
	if got, err := r.ReadEpoch(ctx); err != nil || got != winners[0] {
		t.Fatalf("ReadEpoch = %+v, %v; want the winner's %+v", got, err, winners[0])
	}
}

// A check subject holding what no engine writes is an error naming it, not a guess.
func TestForeignCheckSubject(t *testing.T) {
	ctx, j, r := newRecord(t)
	if _, err := epoch.Adopt(ctx, r, "S", 1); err != nil {
		t.Fatal(err)
	}
	put(t, ctx, j, "s.epoch.1", "hello")
	_, err := r.ReadEpoch(ctx)
	if err == nil || !strings.Contains(err.Error(), "s.epoch.1") || !strings.Contains(err.Error(), "something other than an engine") {
		t.Fatalf("ReadEpoch over a foreign check subject = %v, want an error naming s.epoch.1", err)
	}
	put(t, ctx, j, "s.epoch.1", "", supersededBy, "1")
	if _, err := r.ReadEpoch(ctx); err == nil || !strings.Contains(err.Error(), supersededBy) {
		t.Fatalf("ReadEpoch over a marker that names no newer epoch = %v, want an error", err)
	}
}

// BenchmarkAdvance is one epoch advance on a single-node stream with file storage, the
// storage on which an atomic batch is staged in a synced file store of its own.
func BenchmarkAdvance(b *testing.B) {
	srv := natstest.Start(b)
	j, err := js.New(natstest.Connect(b, srv.URL()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := j.CreateStream(ctx, js.StreamConfig{
		Name: "S", Subjects: []string{"s.>"}, Storage: js.FileStorage,
		AllowRollup: true, AllowAtomicPublish: true,
	}); err != nil {
		b.Fatal(err)
	}
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		b.Fatal(err)
	}
	rec, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if rec, err = r.WriteEpoch(ctx, uint64(i+2), rec); err != nil {
			b.Fatal(err)
		}
	}
}

// Finding 4 of issue 26: a record rewritten by hand past the engines' epoch (B set to
// 999, with no check message on B.999) leaves the check subject of the epoch the
// engines used live. The advance past 999 must supersede it too: a paused holder's
// write under it must not commit. (Before the sweep, it did.)
func TestAdvancePastAHandWrittenRecordSupersedesTheLiveCheck(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream(t, ctx, j)
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Publish(ctx, "s.epoch", []byte("999")); err != nil {
		t.Fatal(err)
	}
	cur, err := epoch.Adopt(ctx, r, "S", 1000)
	if err != nil {
		t.Fatalf("adopt 1000 over a hand-written 999: %v", err)
	}
	if err := write(ctx, j, r, stale); !jserr.IsConflict(err) {
		t.Fatalf("a write under epoch 1 after the advance to 1000 = %v, want refused (10071)", err)
	}
	if err := write(ctx, j, r, cur); err != nil {
		t.Fatalf("a write under epoch 1000: %v", err)
	}
}

// The record deleted by hand (B purged) leaves the last check subject live: an
// adoption from none supersedes it, and one at or below an epoch the bucket has seen
// is refused as stale, naming it.
func TestAdoptionFromNoneSweepsWhatTheBucketHasSeen(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream(t, ctx, j)
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := epoch.Adopt(ctx, r, "S", 1); err != nil {
		t.Fatal(err)
	}
	live, err := epoch.Adopt(ctx, r, "S", 5)
	if err != nil {
		t.Fatal(err)
	}
	purge := func() {
		t.Helper()
		if err := r.Stream().Purge(ctx, js.WithPurgeSubject("s.epoch")); err != nil {
			t.Fatal(err)
		}
	}
	purge()
	var stale *epoch.StaleError
	if _, err := epoch.Adopt(ctx, r, "S", 3); !errors.As(err, &stale) || stale.Current != 5 {
		t.Fatalf("adopt 3 after the record was deleted, with epoch 5's check live = %v, want stale at 5", err)
	}
	if err := write(ctx, j, r, live); err != nil {
		t.Fatalf("the refused adoption wrote: a write under 5 = %v", err)
	}
	cur, err := epoch.Adopt(ctx, r, "S", 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, live); !jserr.IsConflict(err) {
		t.Fatalf("a write under epoch 5 after adopting 6 from none = %v, want refused (10071)", err)
	}
	if err := write(ctx, j, r, cur); err != nil {
		t.Fatal(err)
	}
}
