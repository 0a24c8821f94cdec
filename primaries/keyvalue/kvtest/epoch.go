package kvtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/epoch/epochtest"
	"github.com/abi-engine/engine/primaries/keyvalue"
)

// Fenced is a keyvalue backend that engines share and that fences their writes by the
// epoch (docs/architecture.md "Epoch"): the JetStream and PostgreSQL backends.
type Fenced interface {
	keyvalue.Store
	AdoptEpoch(ctx context.Context, epoch uint64) error
}

// RunEpoch runs the epoch contract of a shared backend: epochtest's, through the
// store's set, delete and set_if_not_exists, then every keyvalue write under a stale
// epoch. newShared is called once per subtest with fresh, empty shared storage (a
// bucket, a table) and returns open, which opens one more store on that storage each
// time it is called, as another engine does.
func RunEpoch(t *testing.T, newShared func(t *testing.T) (open func(t *testing.T) Fenced)) {
	epochtest.Run(t, func(t *testing.T) func(t *testing.T) epochtest.Store {
		open := newShared(t)
		return func(t *testing.T) epochtest.Store { return epochStore{open(t)} }
	})
	t.Run("StaleWritesChangeNothing", func(t *testing.T) { testStaleWrites(t, newShared(t)) })
}

// epochStore is a keyvalue store as epochtest sees one.
type epochStore struct{ Fenced }

func (s epochStore) Put(ctx context.Context, key string, value []byte) error {
	return s.Set(ctx, key, value, 0)
}

func (s epochStore) Remove(ctx context.Context, key string) error {
	return deleted(s.Delete(ctx, key))
}

func (s epochStore) Value(ctx context.Context, key string) ([]byte, bool, error) {
	return s.Get(ctx, key)
}

func (s epochStore) Create(ctx context.Context, key string, value []byte) error {
	return create(ctx, s.Fenced, key, value, 0)
}

func adopt(t *testing.T, s Fenced, n uint64) { t.Helper(); epochtest.Adopt(t, s, n) }

// testStaleWrites is every write under a stale epoch: refused, and nothing changed;
// then the same writes under the current epoch commit.
func testStaleWrites(t *testing.T, open func(*testing.T) Fenced) {
	old, cur := open(t), open(t)
	adopt(t, old, 1)
	for _, k := range []string{"k", "del", "dim", "over-marker"} {
		check(t, "Set", old.Set(ctx(t), k, []byte("v"), 0))
	}
	_, err := old.Delete(ctx(t), "over-marker") // a delete marker stays behind
	check(t, "Delete", err)
	adopt(t, cur, 2)

	writes := []struct {
		name string
		do   func(s Fenced) error
	}{
		{"Set", func(s Fenced) error { return s.Set(ctx(t), "k", []byte("new"), 0) }},
		{"Set with ttl", func(s Fenced) error { return s.Set(ctx(t), "k", []byte("new"), time.Hour) }},
		{"SetIfNotExists", func(s Fenced) error { return setNX(t, s, "fresh", 0) }},
		{"SetIfNotExists with ttl", func(s Fenced) error { return setNX(t, s, "fresh-ttl", time.Hour) }},
		{"SetIfNotExists over a delete marker", func(s Fenced) error { return setNX(t, s, "over-marker", 0) }},
		{"Delete", func(s Fenced) error { return deleted(s.Delete(ctx(t), "del")) }},
		{"DeleteIfValueMatches", func(s Fenced) error { return deleted(s.DeleteIfValueMatches(ctx(t), "dim", []byte("v"))) }},
	}
	for _, w := range writes {
		epochtest.WantFenced(t, w.name, w.do(old), 1, 2)
	}
	// Nothing changed, as the engine serving now reads it.
	wantValue(t, cur, "k", []byte("v"))
	wantValue(t, cur, "del", []byte("v"))
	wantValue(t, cur, "dim", []byte("v"))
	for _, k := range []string{"fresh", "fresh-ttl", "over-marker"} {
		wantMissing(t, cur, k)
	}
	// The stale engine still reads: a read changes nothing.
	wantValue(t, old, "k", []byte("v"))

	for _, w := range writes {
		check(t, w.name+" under the current epoch", w.do(cur))
	}
	wantValue(t, cur, "k", []byte("new"))
	wantValue(t, cur, "fresh", []byte("v"))
	wantValue(t, cur, "over-marker", []byte("v"))
	wantMissing(t, cur, "del")
	wantMissing(t, cur, "dim")
}

func setNX(t *testing.T, s Fenced, key string, ttl time.Duration) error {
	return create(ctx(t), s, key, []byte("v"), ttl)
}

// create is a set_if_not_exists of an absent key, which must set it.
func create(ctx context.Context, s Fenced, key string, value []byte, ttl time.Duration) error {
	set, err := s.SetIfNotExists(ctx, key, value, ttl)
	if err == nil && !set {
		return fmt.Errorf("SetIfNotExists(%q) of an absent key did not set", key)
	}
	return err
}

func deleted(ok bool, err error) error {
	if err == nil && !ok {
		return errors.New("the key was there but was not deleted")
	}
	return err
}
