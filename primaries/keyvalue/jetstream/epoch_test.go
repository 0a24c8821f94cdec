package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries/internal/jsepoch"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
	"github.com/abi-engine/engine/protocol"
)

// TestEpochContract runs the epoch contract with each store on a connection of its
// own, as each engine has.
func TestEpochContract(t *testing.T) {
	srv := natstest.Start(t)
	var n atomic.Int32
	kvtest.RunEpoch(t, func(t *testing.T) func(t *testing.T) kvtest.Fenced {
		bucket := fmt.Sprintf("KV_EPOCH_%d", n.Add(1))
		return func(t *testing.T) kvtest.Fenced { return open(t, srv.URL(), bucket) }
	})
}

func open(t *testing.T, url, bucket string) *Store {
	t.Helper()
	j, err := js.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: bucket, Storage: js.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The epoch record is an entry of the bucket an operator can read, holding the epoch.
func TestEpochRecordIsAKey(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, srv.URL(), "KV_REC")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.AdoptEpoch(ctx, 7); err != nil {
		t.Fatal(err)
	}
	e, err := s.kv.Get(ctx, epochKey)
	if err != nil || string(e.Value()) != "7" {
		t.Fatalf("the bucket's %s = %v, %v; want 7", epochKey, e, err)
	}
	// A value no engine wrote, or a delete, is never taken for an epoch: the check
	// subjects say the bucket is at 7, the record is written back, and 8 is adopted
	// over it (superseding 7's check). The repair is logged.
	core, logs := observer.New(zap.WarnLevel)
	s.fence.Record().OnRepair(jsepoch.LogRepair(zap.New(core), "keyvalue", "KV_REC"))
	if _, err := s.kv.Put(ctx, epochKey, []byte("seven")); err != nil {
		t.Fatal(err)
	}
	if err := s.AdoptEpoch(ctx, 8); err != nil {
		t.Fatalf("AdoptEpoch over a foreign record: %v", err)
	}
	if err := s.kv.Delete(ctx, epochKey); err != nil {
		t.Fatal(err)
	}
	if err := s.AdoptEpoch(ctx, 9); err != nil {
		t.Fatalf("AdoptEpoch over a deleted record: %v", err)
	}
	if e, err := s.kv.Get(ctx, epochKey); err != nil || string(e.Value()) != "9" {
		t.Fatalf("the bucket's %s = %v, %v; want 9", epochKey, e, err)
	}
	if n := logs.FilterMessageSnippet("repaired").Len(); n != 2 {
		t.Fatalf("repairs logged = %d, want 2: %v", n, logs.All())
	}
}

// TestRecreatedBucket defines what a bucket deleted and recreated does to the epoch:
// the record is gone with the data, so every write is refused (lost, not fenced,
// UNAVAILABLE, retryable) until a probe of a serving engine adopts its epoch again;
// an older engine's probe adopting first is overtaken by the newer one's, and from
// then on the older one is fenced again.
func TestRecreatedBucket(t *testing.T) {
	srv := natstest.Start(t)
	old, cur := open(t, srv.URL(), "KV_RECREATED"), open(t, srv.URL(), "KV_RECREATED")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := old.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := cur.AdoptEpoch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := cur.js.DeleteKeyValue(ctx, "KV_RECREATED"); err != nil {
		t.Fatal(err)
	}
	probeUntilRecreated(t, ctx, cur)
	// cur's probe recreated the bucket and adopted 2 again.
	if err := cur.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatalf("Set after the probe re-adopted: %v", err)
	}
	if err := old.Set(ctx, "k", []byte("old"), 0); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("Set by the older engine after the recreation = %v, want fenced", err)
	}

	// Again, with the older engine probing first.
	if err := cur.js.DeleteKeyValue(ctx, "KV_RECREATED"); err != nil {
		t.Fatal(err)
	}
	probeUntilRecreated(t, ctx, old)
	err := cur.Set(ctx, "k", []byte("v"), 0)
	var pe *protocol.Error
	if !errors.Is(err, epoch.ErrLost) || errors.Is(err, epoch.ErrFenced) || !errors.As(err, &pe) || !pe.Retryable {
		t.Fatalf("Set by the newer engine over the older one's record = %v, want lost, retryable", err)
	}
	if _, err := cur.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cur.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatalf("Set after the newer engine's probe: %v", err)
	}
	if err := old.Set(ctx, "k", []byte("old"), 0); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("Set by the older engine = %v, want fenced", err)
	}
	if v, _, err := cur.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
}

// TestEpochOnAReplicatedBucket: on R3 the server judges one expectation per subject at
// a time, so concurrent writes whose keys share a check shard meet 10164 (nothing
// decided) and are sent again; none may fail, and the fencing holds.
func TestEpochOnAReplicatedBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.StartCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stores := make([]*Store, 2)
	for i := range stores {
		j, err := js.New(natstest.Connect(t, c.Nodes[i].URL()))
		if err != nil {
			t.Fatal(err)
		}
		if stores[i], err = New(ctx, j, Config{Bucket: "KV_R3", Replicas: 3}); err != nil {
			t.Fatal(err)
		}
	}
	cur, old := stores[0], stores[1]
	if err := old.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := cur.AdoptEpoch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 10
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("w%d-%d", w, i)
				switch i % 3 {
				case 0:
					errs <- cur.Set(ctx, key, []byte("v"), 0)
				case 1:
					set, err := cur.SetIfNotExists(ctx, key, []byte("v"), 0)
					if err == nil && !set {
						err = fmt.Errorf("SetIfNotExists(%s) did not set", key)
					}
					errs <- err
				default:
					if err := cur.Set(ctx, key, []byte("v"), 0); err != nil {
						errs <- err
						continue
					}
					_, err := cur.Delete(ctx, key)
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a write on R3 under the current epoch: %v", err)
		}
	}
	if err := old.Set(ctx, "w0-0", []byte("stale"), 0); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("Set under the older epoch on R3 = %v, want fenced", err)
	}
}

// The two-check writes carry the epoch check on the abi.fence message, but on the
// check shard of the key they write: writes to different keys are judged in parallel
// on a replicated bucket, as sets are.
func TestFenceMessageChecksTheKeysShard(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, srv.URL(), "KV_FENCE_SHARD")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	for i := range 8 {
		key := fmt.Sprintf("key-%d", i)
		if _, err := s.SetIfNotExists(ctx, key, []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
		m, err := s.stream.GetLastMsgForSubject(ctx, s.prefix+fenceKey)
		if err != nil {
			t.Fatal(err)
		}
		want := &nats.Msg{Subject: s.prefix + encode(key)}
		s.fence.Carry(want, jsepoch.Token{Record: s.fence.Held()})
		got := m.Header.Get(js.ExpectedLastSubjSeqSubjHeader)
		if got != want.Header.Get(js.ExpectedLastSubjSeqSubjHeader) {
			t.Fatalf("set_if_not_exists %q: the fence message checks %q, want the key's shard %q", key, got, want.Header.Get(js.ExpectedLastSubjSeqSubjHeader))
		}
		shards[got] = true
	}
	if len(shards) < 2 {
		t.Fatalf("8 keys' fence messages all checked %v", shards)
	}
}
