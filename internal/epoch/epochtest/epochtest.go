// Package epochtest is the part of the epoch contract (package internal/epoch,
// docs/architecture.md "Epoch") that every shared backend keeps the same way, whatever
// it stores: the adoption rule, adoptions racing, a clean handover's overlap and bump,
// an engine's own epoch moving under its writes, and a store that never adopted one.
// kvtest and objtest run it through a Store of their kind and add the writes only
// their kind has.
package epochtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/protocol"
)

// Store is a shared backend seen through the calls the contract needs.
type Store interface {
	AdoptEpoch(ctx context.Context, epoch uint64) error
	// Put stores value under key, over any value it had.
	Put(ctx context.Context, key string, value []byte) error
	// Remove deletes key, which holds a value.
	Remove(ctx context.Context, key string) error
	// Value reads key.
	Value(ctx context.Context, key string) (value []byte, found bool, err error)
}

// Creator is a Store with a second way to write, one that only creates (keyvalue's
// set_if_not_exists): the engine's own epoch moving under writes runs it too.
type Creator interface {
	Create(ctx context.Context, key string, value []byte) error
}

// Run runs the shared contract. newShared is called once per subtest with fresh, empty
// shared storage (a bucket, a table) and returns open, which opens one more store on
// that storage each time it is called, as another engine does.
func Run(t *testing.T, newShared func(t *testing.T) (open func(t *testing.T) Store)) {
	tests := []struct {
		name string
		run  func(*testing.T, func(*testing.T) Store)
	}{
		{"AdoptionRule", testAdoptionRule},
		{"HandoverInTurn", testHandoverInTurn},
		{"AdoptionRacesAdoption", testAdoptionRace},
		{"OwnEpochMovesUnderWrites", testOwnEpochMoves},
		{"NeverAdopted", testNeverAdopted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newShared(t)) })
	}
}

// WantFenced checks a write refused for a stale epoch: UNAVAILABLE, retryable (it
// stored nothing), matching epoch.ErrFenced, and naming both epochs (mine 0: the
// writer held none).
func WantFenced(t testing.TB, what string, err error, mine, theirs uint64) {
	t.Helper()
	var pe *protocol.Error
	switch {
	case !errors.Is(err, epoch.ErrFenced):
		t.Fatalf("%s under stale epoch %d (the store is at %d): err = %v, want one matching epoch.ErrFenced", what, mine, theirs, err)
	case !errors.As(err, &pe) || pe.Code != protocol.Unavailable || !pe.Retryable:
		t.Fatalf("%s under a stale epoch: err = %v, want UNAVAILABLE, retryable", what, err)
	case !strings.Contains(pe.Message, fmt.Sprintf("epoch %d", theirs)) ||
		(mine > 0 && !strings.Contains(pe.Message, fmt.Sprintf("epoch %d", mine))):
		t.Fatalf("%s under a stale epoch: %q does not name both epochs (%d, %d)", what, pe.Message, mine, theirs)
	}
}

// Adopt adopts n, failing the test if the store refuses it.
func Adopt(t testing.TB, s interface {
	AdoptEpoch(context.Context, uint64) error
}, n uint64) {
	t.Helper()
	if err := s.AdoptEpoch(Ctx(t), n); err != nil {
		t.Fatalf("AdoptEpoch(%d): %v", n, err)
	}
}

// Ctx is a context for one call of a test, ended with it.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func check(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantValue(t *testing.T, s Store, key string, want []byte) {
	t.Helper()
	got, found, err := s.Value(Ctx(t), key)
	if err != nil || !found || string(got) != string(want) {
		t.Fatalf("%q = %q, %v, %v; want %q", key, got, found, err, want)
	}
}

func testAdoptionRule(t *testing.T, open func(*testing.T) Store) {
	a, b := open(t), open(t)
	Adopt(t, a, 2)
	Adopt(t, a, 2) // equal: used as it is
	err := b.AdoptEpoch(Ctx(t), 1)
	if !errors.Is(err, epoch.ErrFenced) || !strings.Contains(err.Error(), "epoch 2") || !strings.Contains(err.Error(), "epoch 1") {
		t.Fatalf("AdoptEpoch(1) on a store at 2 = %v, want fenced, naming both epochs", err)
	}
	Adopt(t, b, 2) // the other engine's epoch, as after a clean release
	Adopt(t, b, 5) // advanced past a gap
	if err := a.AdoptEpoch(Ctx(t), 4); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("AdoptEpoch(4) on a store at 5 = %v, want fenced", err)
	}
}

// testHandoverInTurn is two engines on one store as a clean handover has them: the
// successor adopts the same epoch (both write: the designed overlap), then the next
// one, and from that moment the old engine's writes are refused.
func testHandoverInTurn(t *testing.T, open func(*testing.T) Store) {
	old, next := open(t), open(t)
	Adopt(t, old, 1)
	check(t, "a write by the old engine", old.Put(Ctx(t), "a", []byte("old")))
	Adopt(t, next, 1)
	check(t, "a write by the successor under the same epoch", next.Put(Ctx(t), "b", []byte("next")))
	check(t, "a write by the old engine during the overlap", old.Put(Ctx(t), "a", []byte("old-2")))
	Adopt(t, next, 2)
	WantFenced(t, "a write by the old engine after the bump", old.Put(Ctx(t), "a", []byte("late")), 1, 2)
	WantFenced(t, "a delete by the old engine after the bump", old.Remove(Ctx(t), "b"), 1, 2)
	check(t, "a write by the successor", next.Put(Ctx(t), "a", []byte("next")))
	wantValue(t, next, "a", []byte("next"))
	wantValue(t, next, "b", []byte("next"))
}

// testAdoptionRace has engines adopt different epochs at once: the highest wins
// whatever the order, and only its writes commit; engines adopting the same epoch at
// once all succeed.
func testAdoptionRace(t *testing.T, open func(*testing.T) Store) {
	const n = 6
	stores := make([]Store, n)
	for i := range stores {
		stores[i] = open(t)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.AdoptEpoch(Ctx(t), uint64(i+1)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, epoch.ErrFenced) {
			t.Fatalf("AdoptEpoch(%d): %v", i+1, err)
		}
	}
	if errs[n-1] != nil {
		t.Fatalf("AdoptEpoch(%d), the highest: %v", n, errs[n-1])
	}
	for i, s := range stores[:n-1] {
		held := uint64(i + 1) // what it holds: its epoch, or none if its adoption lost
		if errs[i] != nil {
			held = 0
		}
		WantFenced(t, fmt.Sprintf("a write by the engine that adopted %d", i+1), s.Put(Ctx(t), "k", []byte("lost")), held, n)
	}
	check(t, "a write by the winner", stores[n-1].Put(Ctx(t), "k", []byte("won")))

	same := make([]Store, 4)
	for i := range same {
		same[i] = open(t)
	}
	for i, s := range same {
		wg.Go(func() { errs[i] = s.AdoptEpoch(Ctx(t), n+1) })
	}
	wg.Wait()
	for i, s := range same {
		check(t, fmt.Sprintf("AdoptEpoch(%d) by engine %d of 4", n+1, i), errs[i])
		check(t, "a write", s.Put(Ctx(t), fmt.Sprintf("same-%d", i), []byte("v")))
	}
	wantValue(t, same[0], "k", []byte("won"))
}

// testOwnEpochMoves has one engine adopt its next epoch while its writes run: a write
// sent under the old one and refused is sent again under the new one, so none fails.
// Half the writers create, when the store can.
func testOwnEpochMoves(t *testing.T, open func(*testing.T) Store) {
	s := open(t)
	Adopt(t, s, 1)
	const writers, each = 8, 12
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		write := s.Put
		if c, ok := s.(Creator); ok && w%2 == 1 {
			write = c.Create
		}
		wg.Go(func() {
			<-start
			for i := range each {
				errs <- write(Ctx(t), fmt.Sprintf("w%d-%d", w, i), []byte("v"))
			}
		})
	}
	close(start)
	Adopt(t, s, 2)
	wg.Wait()
	close(errs)
	for err := range errs {
		check(t, "a write while this engine adopted its next epoch", err)
	}
	wantValue(t, s, fmt.Sprintf("w%d-%d", writers-1, each-1), []byte("v"))
}

// testNeverAdopted is a store that was never told an epoch: it writes while the store
// has none either (one engine, tests), and is refused once an engine adopted one.
func testNeverAdopted(t *testing.T, open func(*testing.T) Store) {
	plain, fenced := open(t), open(t)
	check(t, "a write before any epoch", plain.Put(Ctx(t), "k", []byte("v")))
	Adopt(t, fenced, 1)
	WantFenced(t, "a write by a store that adopted no epoch", plain.Put(Ctx(t), "k", []byte("w")), 0, 1)
	wantValue(t, fenced, "k", []byte("v"))
}
