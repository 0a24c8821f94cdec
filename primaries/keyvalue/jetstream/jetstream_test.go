package jetstream

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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
