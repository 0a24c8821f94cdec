package jetstream

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestContract(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	kvtest.Run(t, func(t *testing.T) keyvalue.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A bucket per subtest, so each starts empty.
		s, err := New(ctx, j, Config{Bucket: fmt.Sprintf("KV_TEST_%d", n.Add(1)), Storage: js.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A second store on an existing bucket works on the same data, as a second engine does.
func TestSharedBucket(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stores []*Store
	for range 2 {
		j, err := js.New(natstest.Connect(t, srv.URL()))
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(ctx, j, Config{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	if err := stores[0].Set(ctx, "shared key", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, found, err := stores[1].Get(ctx, "shared key"); err != nil || !found || string(v) != "v" {
		t.Fatalf("other engine reads %q %v %v", v, found, err)
	}
	if stores[0].LocalStorage() != "" {
		t.Fatalf("LocalStorage = %q, want shared", stores[0].LocalStorage())
	}
}

func TestTTLRoundsUpToSeconds(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		time.Nanosecond:                time.Second,
		time.Second:                    time.Second,
		time.Second + time.Millisecond: 2 * time.Second,
		90 * time.Minute:               90 * time.Minute,
	} {
		if got := ttlSeconds(in); got != want {
			t.Errorf("ttlSeconds(%s) = %s, want %s", in, got, want)
		}
	}
}

var errUndecided = &js.APIError{Code: 400, ErrorCode: js.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}

// A write left undecided by a replicated bucket (10164) is sent again, never read as a
// conflict: set_if_not_exists of an absent key sets it, and a delete of a present key
// deletes it. (Before package jserr, this backend answered {set: false} and
// {deleted: false}.) Each batch is answered 10164 once without being sent, as a
// replicated bucket answers a write that meets another proposal in flight.
func TestUndecidedWritesAreSentAgain(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: "KV_UNDECIDED", Storage: js.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	var batches atomic.Int32
	send := s.publishBatch
	s.publishBatch = func(ctx context.Context, msgs []*nats.Msg) error {
		if batches.Add(1)%2 == 1 {
			return fmt.Errorf("%w: %w", errUndecided, js.ErrKeyExists)
		}
		return send(ctx, msgs)
	}
	set, err := s.SetIfNotExists(ctx, "k", []byte("v"), 0)
	if err != nil || !set {
		t.Fatalf("SetIfNotExists of an absent key after an undecided write = %v, %v; want true, nil", set, err)
	}
	if v, found, err := s.Get(ctx, "k"); err != nil || !found || string(v) != "v" {
		t.Fatalf("Get = %q, %v, %v; want the value set", v, found, err)
	}
	deleted, err := s.Delete(ctx, "k")
	if err != nil || !deleted {
		t.Fatalf("Delete of a present key after an undecided write = %v, %v; want true, nil", deleted, err)
	}
	if n := batches.Load(); n != 4 {
		t.Fatalf("%d batches sent; want each of the two writes sent twice", n)
	}
}
