package jetstreamstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/lease/leasetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bucketSeq atomic.Int64

func open(t *testing.T, nc *nats.Conn, replicas int) *jetstreamstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{
		Bucket: fmt.Sprintf("ABI_ENGINE_T%d", bucketSeq.Add(1)), Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContractSingleServer(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	leasetest.Run(t, func(t *testing.T) lease.Store { return open(t, nc, 1) })
}

func TestContractReplicatedBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster takes seconds to elect")
	}
	c := natstest.StartCluster(t)
	nc := natstest.Connect(t, c.URLs())
	leasetest.Run(t, func(t *testing.T) lease.Store { return open(t, nc, 3) })

	// Concurrent creates on R3 lose with 10164 as well as 10071; every loser must read
	// as a conflict, exactly one wins.
	t.Run("concurrent creates over a delete marker have one winner", func(t *testing.T) {
		s := open(t, nc, 3)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rev, err := s.Create(ctx, leasetest.Holder("seed", ""))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, rev); err != nil {
			t.Fatal(err)
		}
		for round := range 5 {
			var wg sync.WaitGroup
			var wins, conflicts atomic.Int32
			var other atomic.Value
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.Create(ctx, leasetest.Holder(fmt.Sprint(i), ""))
					switch {
					case err == nil:
						wins.Add(1)
					case errors.Is(err, lease.ErrConflict):
						conflicts.Add(1)
					default:
						other.Store(err)
					}
				}()
			}
			wg.Wait()
			if e := other.Load(); e != nil {
				t.Fatalf("round %d: unclassified error %v", round, e)
			}
			if wins.Load() != 1 || conflicts.Load() != 5 {
				t.Fatalf("round %d: %d wins, %d conflicts", round, wins.Load(), conflicts.Load())
			}
			r, err := s.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, r.Revision); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestForeignValueReadsAsUnknownHolder(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	s := open(t, nc, 1)
	ctx := context.Background()
	rev, err := s.Put(ctx, []byte("not json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Revision != rev || r.Holder.Known() {
		t.Fatalf("Read = %+v, want an unknown holder at revision %d", r, rev)
	}
	// It is still a lease a contender can take over by CAS.
	if _, err := s.Update(ctx, leasetest.Holder("me", ""), rev); err != nil {
		t.Fatalf("takeover of a foreign value: %v", err)
	}
}

func TestTwoConnectionsShareOneLease(t *testing.T) {
	srv := natstest.Start(t)
	a := open(t, natstest.Connect(t, srv.URL()), 1)
	ctx := context.Background()
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	names := js.KeyValueStoreNames(ctx)
	var bucket string
	for n := range names.Name() {
		bucket = n
	}
	b, err := jetstreamstore.Open(ctx, natstest.Connect(t, srv.URL()), jetstreamstore.Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := a.Create(ctx, leasetest.Holder("a", ""))
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Read(ctx)
	if err != nil || r.Revision != rev || r.Holder.InstanceID != "engine-a" {
		t.Fatalf("other connection reads %v, %v", r, err)
	}
}

func TestDefaultBucketIsCreatedWithTheDesignsSettings(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	ctx := context.Background()
	if _, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, jetstreamstore.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
	if st.History() != 1 || info.Config.Storage != jetstream.FileStorage || info.Config.Replicas != 1 || st.TTL() != 0 {
		t.Fatalf("bucket: history %d storage %v replicas %d ttl %v", st.History(), info.Config.Storage, info.Config.Replicas, st.TTL())
	}
	// Opening again binds the same bucket.
	if _, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{}); err != nil {
		t.Fatal(err)
	}
}

func TestWatchSurvivesABrokerRestart(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	s := open(t, nc, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rev, err := s.Create(ctx, leasetest.Holder("a", ""))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if r := <-w.Updates(); r.Revision != rev {
		t.Fatalf("first record %v", r)
	}
	srv.Restart()
	// Write after the restart; the watch must see it well before a KV watcher's own
	// 10-20 s recovery. The first writes may fail while the client reconnects.
	var next uint64
	for next == 0 {
		next, err = s.Update(ctx, leasetest.Holder("a", ""), rev)
		if err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case r := <-w.Updates():
			if r.Revision == next {
				return
			}
		case <-deadline:
			t.Fatal("the watch did not see a write made after the broker restart within 5 s")
		}
	}
}

// The holder's watch tells a delete or purge after its revision from one before: the
// free record carries the marker's revision. The lease period lives in a key of its
// own and the record keeps its six keys.
func TestPurgeCarriesItsRevisionAndPeriodHasItsOwnKey(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	s := open(t, nc, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := leasetest.Holder("a", "")
	rev, err := s.Create(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, lease.Period{InstanceID: a.InstanceID, Lease: 40 * time.Second}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	var bucket string
	for n := range js.KeyValueStoreNames(ctx).Name() {
		bucket = n
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := kv.Get(ctx, jetstreamstore.Key)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(owner.Value(), &keys); err != nil || len(keys) != 6 {
		t.Fatalf("owner = %s, want the six keys", owner.Value())
	}
	period, err := kv.Get(ctx, jetstreamstore.PeriodKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(period.Value()), `{"instance_id":"engine-a","lease_ms":40000}`; got != want {
		t.Fatalf("%s = %s, want %s", jetstreamstore.PeriodKey, got, want)
	}
	w, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if r := <-w.Updates(); r.Revision != rev || r.Period != (lease.Period{}) {
		t.Fatalf("first record %+v, want revision %d and no period (a watch carries none)", r, rev)
	}
	if err := kv.Purge(ctx, jetstreamstore.Key); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-w.Updates():
		if !r.Free() || r.Freed <= rev {
			t.Fatalf("after the purge: %+v, want free with Freed > %d", r, rev)
		}
	case <-ctx.Done():
		t.Fatal("the watch did not deliver the purge")
	}
	if r, err := s.Read(ctx); err != nil || !r.Free() || r.Freed != 0 {
		t.Fatalf("Read after the purge = %+v, %v; want free", r, err)
	}
}

// TestOpenRefusesABucketThatCanLoseTheLease is issue 9 item 2: a lease bucket created
// beforehand with settings under which the key can vanish by itself is refused, naming
// the bucket and the setting, instead of being used as it is.
func TestOpenRefusesABucketThatCanLoseTheLease(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		bucket   jetstream.KeyValueConfig
		replicas int
		want     string
	}{
		{"a ttl", jetstream.KeyValueConfig{TTL: 30 * time.Second}, 1, "ttl (max age) is 30s (want none)"},
		{"history 5", jetstream.KeyValueConfig{History: 5}, 1, "history is 5 (want 1)"},
		{"memory storage", jetstream.KeyValueConfig{Storage: jetstream.MemoryStorage}, 1, "storage is memory (want file)"},
		{"per-key ttls", jetstream.KeyValueConfig{LimitMarkerTTL: time.Second}, 1, "per-key ttl is on (want off)"},
		{"fewer replicas than configured", jetstream.KeyValueConfig{}, 3, "replicas is 1 (want 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tc.bucket.Bucket = fmt.Sprintf("ABI_ENGINE_T%d", bucketSeq.Add(1))
			if _, err := js.CreateKeyValue(ctx, tc.bucket); err != nil {
				t.Fatal(err)
			}
			_, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{Bucket: tc.bucket.Bucket, Replicas: tc.replicas})
			var shape *jsbucket.ShapeError
			if !errors.As(err, &shape) || len(shape.Wrong) != 1 {
				t.Fatalf("Open = %v, want one wrong setting", err)
			}
			for _, s := range []string{"lease bucket " + tc.bucket.Bucket, tc.want} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q: %v", s, err)
				}
			}
		})
	}
}

// TestADeletedBucketIsRecreated is issue 9 item 10 at the store: after the bucket was
// deleted under a holder, the next failed call recreates it with the configured
// settings, and the holder takes the lease again by the normal rules (its renewal
// conflicts, the lease reads free, it creates it).
func TestADeletedBucketIsRecreated(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := open(t, nc, 1)
	me := leasetest.Holder("me", "")
	rev, err := s.Create(ctx, me)
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
	// The first failure finds the bucket gone; one at least a second later recreates it.
	for {
		_, err = s.Update(ctx, me, rev)
		if err == nil || errors.Is(err, lease.ErrConflict) {
			t.Fatalf("renewal on a deleted bucket = %v, want a failure", err)
		}
		if strings.Contains(err.Error(), "recreated it") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the bucket was never recreated; last: %v", err)
		}
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("the bucket was not recreated: %v", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info := st.(*jetstream.KeyValueBucketStatus).StreamInfo(); st.History() != 1 || info.Config.Storage != jetstream.FileStorage || st.TTL() != 0 {
		t.Fatalf("recreated with history %d storage %v ttl %v", st.History(), info.Config.Storage, st.TTL())
	}
	if _, err := s.Update(ctx, me, rev); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("renewal on the recreated bucket = %v, want a conflict", err)
	}
	if r, err := s.Read(ctx); err != nil || !r.Free() {
		t.Fatalf("Read = %v %v, want a free lease", r, err)
	}
	if _, err := s.Create(ctx, me); err != nil {
		t.Fatalf("taking the lease again: %v", err)
	}
}

// TestOpenAcceptsTheBucketAPythonEngineMakes: nats-py (2.16), the Python engines'
// client, creates every KV bucket with message TTLs allowed, and a Python engine makes
// ABI_ENGINE on first use. abi-engine binds such a bucket (it refused it as having
// per-key TTLs, so it could never stand by behind a Python engine) and takes the lease
// in it by the normal rules.
func TestOpenAcceptsTheBucketAPythonEngineMakes(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket := fmt.Sprintf("ABI_ENGINE_T%d", bucketSeq.Add(1))
	// The stream nats-py's create_key_value(KeyValueConfig(bucket=B, history=1)) adds.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "KV_" + bucket, Subjects: []string{"$KV." + bucket + ".>"},
		AllowRollup: true, AllowMsgTTL: true, DenyDelete: true, Discard: jetstream.DiscardNew,
		Duplicates: 2 * time.Minute, MaxConsumers: -1, MaxMsgs: -1, MaxMsgsPerSubject: 1,
		Storage: jetstream.FileStorage, Replicas: 1,
	}); err != nil {
		t.Fatal(err)
	}
	s, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{Bucket: bucket})
	if err != nil {
		t.Fatalf("Open of a bucket made by nats-py: %v", err)
	}
	rev, err := s.Create(ctx, leasetest.Holder("me", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, leasetest.Holder("me", ""), rev); err != nil {
		t.Fatalf("renewal in a bucket made by nats-py: %v", err)
	}
}
