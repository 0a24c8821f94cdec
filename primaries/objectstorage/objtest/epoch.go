package objtest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/abi-engine/engine/internal/epoch/epochtest"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// Fenced is an object_storage backend that engines share and that fences their writes
// by the epoch (docs/architecture.md "Epoch"): the JetStream backend.
type Fenced interface {
	objectstorage.Store
	AdoptEpoch(ctx context.Context, epoch uint64) error
}

// RunEpoch runs the epoch contract of a shared backend: epochtest's, through
// PutObject and DeleteObject under the empty prefix, then every write under a stale
// epoch, small and multi-chunk. newShared is called once per subtest with fresh, empty
// shared storage and returns open, which opens one more store on it each time it is
// called, as another engine does.
func RunEpoch(t *testing.T, newShared func(t *testing.T) (open func(t *testing.T) Fenced)) {
	epochtest.Run(t, func(t *testing.T) func(t *testing.T) epochtest.Store {
		open := newShared(t)
		return func(t *testing.T) epochtest.Store { return epochStore{open(t)} }
	})
	t.Run("StaleWritesChangeNothing", func(t *testing.T) { testStaleWrites(t, newShared(t)) })
}

// epochStore is an object store as epochtest sees one: keys are objects without a
// prefix.
type epochStore struct{ Fenced }

func (s epochStore) Put(ctx context.Context, key string, value []byte) error {
	return s.PutObject(ctx, "", key, value)
}

func (s epochStore) Remove(ctx context.Context, key string) error {
	return s.DeleteObject(ctx, "", key)
}

func (s epochStore) Value(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := s.GetObject(ctx, "", key)
	if errors.Is(err, protocol.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

func adopt(t *testing.T, s Fenced, n uint64) { t.Helper(); epochtest.Adopt(t, s, n) }

// bigObject spans several chunks of the JetStream object store (128 KiB each).
func bigObject(fill byte) []byte { return bytes.Repeat([]byte{fill}, 300<<10) }

// testStaleWrites is every write under a stale epoch, small and multi-chunk: refused,
// and no object changed; then the same writes under the current epoch commit.
func testStaleWrites(t *testing.T, open func(*testing.T) Fenced) {
	old, cur := open(t), open(t)
	adopt(t, old, 1)
	check(t, "PutObject", old.PutObject(ctx(t), "p", "small", []byte("v")))
	check(t, "PutObject", old.PutObject(ctx(t), "p", "big", bigObject('a')))
	check(t, "PutObject", old.PutObject(ctx(t), "p", "del", []byte("v")))
	adopt(t, cur, 2)

	writes := []struct {
		name string
		do   func(s Fenced) error
	}{
		{"PutObject over an object", func(s Fenced) error { return s.PutObject(ctx(t), "p", "small", []byte("new")) }},
		{"PutObject of a new object", func(s Fenced) error { return s.PutObject(ctx(t), "p", "fresh", []byte("new")) }},
		{"PutObject of a multi-chunk object over one", func(s Fenced) error { return s.PutObject(ctx(t), "p", "big", bigObject('b')) }},
		{"PutObject of a new multi-chunk object", func(s Fenced) error { return s.PutObject(ctx(t), "p", "fresh-big", bigObject('b')) }},
		{"PutObject of an empty object", func(s Fenced) error { return s.PutObject(ctx(t), "p", "empty", nil) }},
		{"DeleteObject", func(s Fenced) error { return s.DeleteObject(ctx(t), "p", "del") }},
	}
	for _, w := range writes {
		epochtest.WantFenced(t, w.name, w.do(old), 1, 2)
	}
	wantContent(t, cur, "p", "small", []byte("v"))
	wantContent(t, cur, "p", "big", bigObject('a'))
	wantContent(t, cur, "p", "del", []byte("v"))
	wantMissing(t, cur, "p", "fresh")
	wantMissing(t, cur, "p", "fresh-big")
	wantMissing(t, cur, "p", "empty")
	wantList(t, cur, "p", "big", "del", "small")
	wantContent(t, old, "p", "small", []byte("v")) // the stale engine still reads

	for _, w := range writes {
		check(t, w.name+" under the current epoch", w.do(cur))
	}
	wantContent(t, cur, "p", "small", []byte("new"))
	wantContent(t, cur, "p", "big", bigObject('b'))
	wantContent(t, cur, "p", "fresh-big", bigObject('b'))
	wantContent(t, cur, "p", "empty", []byte{})
	wantList(t, cur, "p", "big", "empty", "fresh", "fresh-big", "small")
}
