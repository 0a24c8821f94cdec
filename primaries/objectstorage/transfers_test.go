package objectstorage_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// gatedStore is a Store whose GetObject waits for release, counting the reads under
// way; its objects are all size bytes long.
type gatedStore struct {
	objectstorage.Store
	size    int64
	release chan struct{}
	reading atomic.Int64
	most    atomic.Int64
	reads   atomic.Int64
}

func (s *gatedStore) GetObjectMetadata(context.Context, string, string) (objectstorage.Metadata, error) {
	return objectstorage.Metadata{Size: s.size}, nil
}

func (s *gatedStore) GetObject(ctx context.Context, _, _ string) ([]byte, error) {
	s.reads.Add(1)
	n := s.reading.Add(1)
	defer s.reading.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	select {
	case <-s.release:
		return make([]byte, s.size), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func getRequest(reserve func(context.Context, int64) error) sessions.TransferRequest {
	meta, _ := json.Marshal(protocol.ObjectTransfer{Prefix: "p", Key: "k"})
	return sessions.TransferRequest{Operation: protocol.OpTransferGet, Metadata: meta, Reserve: reserve}
}

// A transfer get reserves the object's size, from its metadata, before it reads a
// byte: a refused reservation is the start's error and the object is never read
// (issue 26: each start read its object before its session asked for the bytes).
func TestTransferGetReservesBeforeItReads(t *testing.T) {
	store := &gatedStore{size: 40 << 20, release: make(chan struct{})}
	close(store.release) // a read, if any, returns at once
	get := objectstorage.Transfers(store)[protocol.OpTransferGet]
	var asked int64
	_, err := get(t.Context(), getRequest(func(_ context.Context, n int64) error {
		asked = n
		return protocol.Exhausted("no room")
	}))
	if pe, ok := err.(*protocol.Error); !ok || pe.Code != protocol.ResourceExhausted {
		t.Fatalf("start: %v, want the reservation's RESOURCE_EXHAUSTED", err)
	}
	if asked != store.size || store.reads.Load() != 0 {
		t.Fatalf("reserved %d and read %d times; want %d reserved and nothing read", asked, store.reads.Load(), store.size)
	}
}

// At most two gets of one transfer host read from the backend at once; the others
// wait their turn, and one whose start ends while it waits reads nothing.
func TestTransferGetsReadTwoAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedStore{size: 1, release: make(chan struct{})}
		get := objectstorage.Transfers(store)[protocol.OpTransferGet]
		reserve := func(context.Context, int64) error { return nil }
		var wg sync.WaitGroup
		gets := func(n int) {
			for range n {
				wg.Go(func() {
					if _, err := get(t.Context(), getRequest(reserve)); err != nil {
						t.Error(err)
					}
				})
			}
		}
		gets(2)
		synctest.Wait() // both read
		late, cancel := context.WithCancel(t.Context())
		var lateErr error
		wg.Go(func() { _, lateErr = get(late, getRequest(reserve)) })
		gets(3)
		synctest.Wait()
		if n := store.reading.Load(); n != 2 {
			t.Errorf("%d gets read at once, want 2", n)
		}
		cancel()
		synctest.Wait()
		if pe, ok := lateErr.(*protocol.Error); !ok || pe.Code != protocol.DeadlineExceeded {
			t.Errorf("a get whose start ended while it waited: %v, want DEADLINE_EXCEEDED", lateErr)
		}
		close(store.release)
		wg.Wait()
		if most, reads := store.most.Load(), store.reads.Load(); most != 2 || reads != 5 {
			t.Fatalf("at most %d reads at once and %d in all, want 2 and 5", most, reads)
		}
	})
}
