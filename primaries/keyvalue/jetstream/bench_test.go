package jetstream

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/natstest"
)

// benchStore is a store on a bucket of its own, under epoch 1.
func benchStore(b *testing.B, url string, storage js.StorageType) *Store {
	b.Helper()
	j, err := js.New(natstest.Connect(b, url))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: fmt.Sprintf("BENCH_%d", time.Now().UnixNano()), Storage: storage})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkWrites measures one write at a time on a single-node broker, on file and on
// memory storage, each operation as this backend makes it ("epoch") and as it made it
// before the epoch ("plain": the same publish without the check, nats.go's Create for
// set_if_not_exists, its Purge at a revision for delete). get is a read: the epoch
// does not touch it. Compare ns/op within one run. (On a single node with file
// storage the server stages every atomic batch in a file store of its own, which is
// what set_if_not_exists and delete pay for.)
func BenchmarkWrites(b *testing.B) {
	for _, st := range []js.StorageType{js.FileStorage, js.MemoryStorage} {
		b.Run(strings.ToLower(st.String()), func(b *testing.B) { benchWrites(b, st) })
	}
}

func benchWrites(b *testing.B, storage js.StorageType) {
	srv := natstest.Start(b)
	ctx := context.Background()
	value := []byte("a value of some thirty-two bytes")
	var n atomic.Int64
	key := func() string { return fmt.Sprintf("k%d", n.Add(1)) }

	b.Run("get", func(b *testing.B) {
		s := benchStore(b, srv.URL(), storage)
		if err := s.Set(ctx, "k", value, 0); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, _, err := s.Get(ctx, "k"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set/plain", func(b *testing.B) {
		s := benchStore(b, srv.URL(), storage)
		for b.Loop() {
			if _, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: s.prefix + encode("k"), Data: value}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set/epoch", func(b *testing.B) {
		s := benchStore(b, srv.URL(), storage)
		for b.Loop() {
			if err := s.Set(ctx, "k", value, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set_if_not_exists/plain", func(b *testing.B) {
		s := benchStore(b, srv.URL(), storage)
		for b.Loop() {
			if _, err := s.kv.Create(ctx, encode(key()), value); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("set_if_not_exists/epoch", func(b *testing.B) {
		s := benchStore(b, srv.URL(), storage)
		for b.Loop() {
			if set, err := s.SetIfNotExists(ctx, key(), value, 0); err != nil || !set {
				b.Fatal(set, err)
			}
		}
	})
	// A delete reads the key, then deletes at its revision; each round sets it first.
	b.Run("delete/plain", func(b *testing.B) {
		s := benchStore(b, srv.URL(), storage)
		for b.Loop() {
			b.StopTimer()
			if err := s.Set(ctx, "d", value, 0); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			e, err := s.entry(ctx, "d")
			if err != nil || e == nil {
				b.Fatal(e, err)
			}
			if err := s.kv.Purge(ctx, encode("d"), js.LastRevision(e.Revision()), js.PurgeTTL(markerTTL)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("delete/epoch", func(b *testing.B) {
		s := benchStore(b, srv.URL(), storage)
		for b.Loop() {
			b.StopTimer()
			if err := s.Set(ctx, "d", value, 0); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if deleted, err := s.Delete(ctx, "d"); err != nil || !deleted {
				b.Fatal(deleted, err)
			}
		}
	})
}

// BenchmarkReplicatedSets measures sets from 16 goroutines on an R3 bucket, with and
// without the epoch check: every epoch-checked write checks one subject, which the
// server judges one at a time, so they commit one after another (ops/s).
func BenchmarkReplicatedSets(b *testing.B) {
	c := natstest.StartCluster(b)
	j, err := js.New(natstest.Connect(b, c.Nodes[0].URL()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: "BENCH_R3", Replicas: 3})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		b.Fatal(err)
	}
	value := []byte("a value of some thirty-two bytes")
	run := func(b *testing.B, set func(key string) error) {
		var n atomic.Int64
		b.SetParallelism(8) // 16 goroutines on 2 CPUs
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := set(fmt.Sprintf("k%d", n.Add(1)%64)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	}
	b.Run("plain", func(b *testing.B) {
		run(b, func(key string) error {
			_, err := s.js.PublishMsg(context.Background(), &nats.Msg{Subject: s.prefix + encode(key), Data: value})
			return err
		})
	})
	b.Run("epoch", func(b *testing.B) {
		run(b, func(key string) error { return s.Set(context.Background(), key, value, 0) })
	})
}
