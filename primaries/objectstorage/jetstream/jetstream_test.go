package jetstream

import (
	"context"
	"fmt"
	"github.com/abi-engine/engine/internal/leakcheck"
	"sync/atomic"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/objtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Known()...) }

func TestContract(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	objtest.Run(t, func(t *testing.T) objectstorage.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := New(ctx, j, Config{Bucket: fmt.Sprintf("OBJ_TEST_%d", n.Add(1)), Storage: js.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestLocalStorage(t *testing.T) {
	if got := (&Store{}).LocalStorage(); got != "" {
		t.Fatalf("LocalStorage = %q, want shared", got)
	}
}

func TestEpochContract(t *testing.T) {
	srv := natstest.Start(t)
	var n atomic.Int32
	objtest.RunEpoch(t, func(t *testing.T) func(t *testing.T) objtest.Fenced {
		bucket := fmt.Sprintf("OBJ_EPOCH_%d", n.Add(1))
		return func(t *testing.T) objtest.Fenced { return open(t, srv.URL(), bucket) }
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
