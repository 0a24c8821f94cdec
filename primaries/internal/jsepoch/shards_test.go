package jsepoch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/internal/natstest"
)

// subjectsOf returns n subjects s.k.<i>: each in a shard of its own when distinct,
// else all in one shard.
func subjectsOf(n int, distinct bool) []string {
	var out []string
	seen := map[uint32]bool{}
	for i := 0; len(out) < n; i++ {
		subj := "s.k." + strconv.Itoa(i)
		s := shardOf(subj, Shards)
		switch {
		case distinct && !seen[s]:
			seen[s] = true
			out = append(out, subj)
		case !distinct && s == shardOf("s.k.0", Shards):
			out = append(out, subj)
		}
	}
	return out
}

// Every shard of an epoch carries writes under it, at the revision the record gives
// it, and every shard refuses them once the epoch is superseded.
func TestShardedAdvanceFencesEveryShard(t *testing.T) {
	ctx, j, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.revsOf(one)) != Shards {
		t.Fatalf("adopted %+v, want %d shards", one, Shards)
	}
	subjects := subjectsOf(Shards, true)
	for _, s := range subjects {
		if err := writeOn(ctx, j, r, one, s); err != nil {
			t.Fatalf("a write on %s under 1: %v", s, err)
		}
	}
	two, err := epoch.Adopt(ctx, r, "S", 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subjects {
		if err := writeOn(ctx, j, r, one, s); !jserr.IsConflict(err) {
			t.Fatalf("a write on %s (shard %d) under 1 after 2 = %v, want refused", s, shardOf(s, Shards), err)
		}
		if err := writeOn(ctx, j, r, two, s); err != nil {
			t.Fatalf("a write on %s under 2: %v", s, err)
		}
	}
}

// A store last advanced by an engine of the unsharded layout (B.<N> holds "N", no
// shards) is read as it is, its writes expect the head, and the first advance of this
// version fences them and shards the new epoch, whose head an engine of the old layout
// refuses (its check is "N" alone).
func TestUnshardedRecordIsStillFenced(t *testing.T) {
	ctx, j, r := newRecord(t)
	rev := put(t, ctx, j, "s.epoch.1", "1")
	put(t, ctx, j, "s.epoch", "1")
	old := epoch.Record{Epoch: 1, Rev: rev}
	if got, err := r.ReadEpoch(ctx); err != nil || got != old {
		t.Fatalf("ReadEpoch = %+v, %v; want %+v", got, err, old)
	}
	subjects := subjectsOf(8, true)
	for _, s := range subjects {
		if err := writeOn(ctx, j, r, old, s); err != nil {
			t.Fatalf("a write on %s under the unsharded 1: %v", s, err)
		}
	}
	two, err := epoch.Adopt(ctx, r, "S", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.revsOf(two)) != Shards {
		t.Fatalf("adopted %+v, want %d shards", two, Shards)
	}
	for _, s := range subjects {
		if err := writeOn(ctx, j, r, old, s); !jserr.IsConflict(err) {
			t.Fatalf("a write on %s under the unsharded 1 after 2 = %v, want refused", s, err)
		}
	}
	m, err := r.last(ctx, "s.epoch.2")
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) == "2" {
		t.Fatalf("the head of sharded epoch 2 holds %q, which an engine of the unsharded layout takes for its check", m.Data)
	}
}

// A marker on the head that names no shards (written by hand, or by an engine of the
// unsharded layout over an epoch it could not read) still leaves no shard live: a
// reader going past it finds the shards in the stream and marks them.
func TestMarkerNamingNoShardsStillFencesThem(t *testing.T) {
	ctx, j, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	put(t, ctx, j, "s.epoch.1", "", supersededBy, "2")
	if got, err := r.ReadEpoch(ctx); err != nil || got.Epoch != 2 {
		t.Fatalf("ReadEpoch = %+v, %v; want epoch 2", got, err)
	}
	for _, s := range subjectsOf(Shards, true) {
		if err := writeOn(ctx, j, r, one, s); !jserr.IsConflict(err) {
			t.Fatalf("a write on %s under 1 after a reader went to 2 = %v, want refused", s, err)
		}
	}
}

// burst sends one epoch-checked write on each subject at once, each exactly once, and
// counts those the store left undecided because another write checking the same
// subject was in flight (10164).
func burst(t *testing.T, ctx context.Context, j js.JetStream, r *Record, rec epoch.Record, subjects []string) int {
	t.Helper()
	start := make(chan struct{})
	var undecided atomic.Int32
	errs := make(chan error, len(subjects))
	var wg sync.WaitGroup
	for _, s := range subjects {
		wg.Go(func() {
			m := &nats.Msg{Subject: s, Data: []byte("x")}
			r.Check(m, rec)
			<-start
			_, err := j.PublishMsg(ctx, m)
			switch {
			case err == nil:
			case jserr.Classify(err) == jserr.Undecided:
				undecided.Add(1)
			default:
				errs <- fmt.Errorf("a write on %s: %w", s, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(undecided.Load())
}

// On a replicated stream the server judges one expectation per check subject at a
// time. Writes to keys in different shards, sent at once, are in flight at the store
// together: none is ever held back for another. The control shows the bursts do
// overlap at the store: the same burst on keys of one shard is.
func TestConcurrentWritesToDifferentShardsAreNotJudgedOneAtATime(t *testing.T) {
	ctx, j, r := replicatedStream(t)
	rec, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds, controlRounds = 16, 20, 50

	overlapped := false
	for range controlRounds {
		if burst(t, ctx, j, r, rec, subjectsOf(writers, false)) > 0 {
			overlapped = true
			break
		}
	}
	if !overlapped {
		t.Fatalf("%d bursts of %d writes checking one shard were never held back for each other: the writes never overlapped at the store, so this test cannot tell", controlRounds, writers)
	}
	for i := range rounds {
		if n := burst(t, ctx, j, r, rec, subjectsOf(writers, true)); n > 0 {
			t.Fatalf("round %d: %d of %d writes to keys in different shards were held back while another was in flight (10164): the store judged them one at a time", i, n, writers)
		}
	}
}

// A record this Record did not read or write (its shards unknown) is checked on its
// head, which fences as well: writes under it commit while it is current and are
// refused once it is superseded.
func TestRecordReadElsewhereIsCheckedOnItsHead(t *testing.T) {
	ctx, j, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: "s.data"}
	other.Check(m, one)
	if got := m.Header.Get(js.ExpectedLastSubjSeqSubjHeader); got != "s.epoch.1" {
		t.Fatalf("checked on %q, want the head s.epoch.1", got)
	}
	if err := writeOn(ctx, j, other, one, "s.data"); err != nil {
		t.Fatalf("a write under 1 checked on its head: %v", err)
	}
	if _, err := epoch.Adopt(ctx, r, "S", 2); err != nil {
		t.Fatal(err)
	}
	if err := writeOn(ctx, j, other, one, "s.data"); !jserr.IsConflict(err) {
		t.Fatalf("a write under 1 checked on its head after 2 = %v, want refused", err)
	}
}

func TestCheckData(t *testing.T) {
	revs := []uint64{5, 6, 90}
	if got, ok := parseCheck(7, checkData(7, revs)); !ok || !slices.Equal(got, revs) {
		t.Fatalf("parseCheck(%q) = %v, %v", checkData(7, revs), got, ok)
	}
	if got, ok := parseCheck(7, []byte("7")); !ok || got != nil {
		t.Fatalf("the unsharded check = %v, %v", got, ok)
	}
	for _, bad := range []string{"8", "7/", "7/1,", "7/0", "7/01", "7/x", "7/1/2", ""} {
		if _, ok := parseCheck(7, []byte(bad)); ok {
			t.Errorf("parseCheck(%q) took it for epoch 7's check", bad)
		}
	}
}

// An adopter from no record writes its epoch's shards before B and the head (step 0):
// a reader that finds B empty meanwhile sees check subjects with no head at all. It
// reads no record and writes nothing. (Before, it settled "epoch 0", whose check
// subject is B itself, and wrote a check message there: B then held a value no read
// takes for an epoch, or, raced, the reader failed naming B as written by a stranger.)
func TestShardsWithoutAHeadAreNoRecord(t *testing.T) {
	ctx, j, r := newRecord(t)
	if _, ok, err := r.settleShards(ctx, 3); err != nil || !ok {
		t.Fatalf("the shards of epoch 3: %v, %v", ok, err)
	}
	rec, err := r.ReadEpoch(ctx)
	if err != nil || rec != (epoch.Record{}) {
		t.Fatalf("ReadEpoch with shards and no head = %+v, %v; want no record", rec, err)
	}
	if m, err := r.last(ctx, r.base); err != nil || m != nil {
		t.Fatalf("B after the read: %v, %v; want it empty", m, err)
	}
	// The adopter goes on and its batch commits: it reads none as it did.
	if _, err := epoch.Adopt(ctx, r, "S", 3); err != nil {
		t.Fatalf("the adoption that wrote the shards: %v", err)
	}
	_ = j
}

// A reader that repairs the record while an adopter is between its shards and its head
// waits for the head rather than mark the adopter's shards, which would have every write
// of the adopter refused although it holds the record (TestEpochContract's adoption race
// met this); a scan that is no longer patient marks them, so shards an adopter left for
// good never carry a write.
func TestRepairWaitsForAnAdoptionUnderWay(t *testing.T) {
	ctx, _, r := newRecord(t)
	three, err := epoch.Adopt(ctx, r, "S", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.settleShards(ctx, 6); err != nil || !ok {
		t.Fatalf("the shards of epoch 6: %v, %v", ok, err)
	}
	shardHolds := func(s uint32) string {
		m, err := r.last(ctx, r.shardSubject(6, s))
		if err != nil || m == nil {
			t.Fatalf("shard %d of epoch 6: %v, %v", s, m, err)
		}
		return string(m.Data)
	}
	if _, _, err := r.scan(ctx, "deleted", true); !errors.Is(err, epoch.ErrMoved) {
		t.Fatalf("a patient scan with epoch 6 under way = %v, want ErrMoved", err)
	}
	if got := shardHolds(0); got != "6" {
		t.Fatalf("after a patient scan epoch 6's shard holds %q, want its check", got)
	}
	rec, _, err := r.scan(ctx, "deleted", false)
	if err != nil || rec.Epoch != three.Epoch {
		t.Fatalf("the last scan = %+v, %v; want epoch 3", rec, err)
	}
	if got := shardHolds(0); got == "6" {
		t.Fatal("the last scan left epoch 6's shards live")
	}
}

// replicatedStream is stream S (subjects s.>) on a 3-node cluster, R3 with atomic
// publish, and its Record on s.epoch; the context ends with the test, at most 60 s on.
func replicatedStream(t *testing.T) (context.Context, js.JetStream, *Record) {
	t.Helper()
	c := natstest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	j, err := js.New(natstest.Connect(t, c.Nodes[0].URL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateStream(ctx, js.StreamConfig{
		Name: "S", Subjects: []string{"s.>"}, Storage: js.FileStorage, Replicas: 3,
		AllowRollup: true, AllowAtomicPublish: true,
	}); err != nil {
		t.Fatal(err)
	}
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, j, r
}
