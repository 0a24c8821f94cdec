package kvtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

// Fenced is a keyvalue backend that engines share and that fences their writes by the
// epoch (docs/architecture.md "Epoch"): the JetStream and PostgreSQL backends.
type Fenced interface {
	keyvalue.Store
	AdoptEpoch(ctx context.Context, epoch uint64) error
}

// RunEpoch runs the epoch contract of a shared backend. newShared is called once per
// subtest with fresh, empty shared storage (a bucket, a table) and returns open, which
// opens one more store on that storage each time it is called, as another engine does.
func RunEpoch(t *testing.T, newShared func(t *testing.T) (open func(t *testing.T) Fenced)) {
	tests := []struct {
		name string
		run  func(*testing.T, func(*testing.T) Fenced)
	}{
		{"AdoptionRule", testAdoptionRule},
		{"StaleWritesChangeNothing", testStaleWrites},
		{"HandoverInTurn", testHandoverInTurn},
		{"AdoptionRacesAdoption", testAdoptionRace},
		{"OwnEpochMovesUnderWrites", testOwnEpochMoves},
		{"NeverAdopted", testNeverAdopted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newShared(t)) })
	}
}

func adopt(t *testing.T, s Fenced, n uint64) {
	t.Helper()
	if err := s.AdoptEpoch(ctx(t), n); err != nil {
		t.Fatalf("AdoptEpoch(%d): %v", n, err)
	}
}

// WantFenced checks a write refused for a stale epoch: UNAVAILABLE, retryable (it
// stored nothing), matching epoch.ErrFenced, and naming both epochs (mine 0: the
// writer held none). objtest checks the same.
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

func testAdoptionRule(t *testing.T, open func(*testing.T) Fenced) {
	a, b := open(t), open(t)
	adopt(t, a, 2)
	adopt(t, a, 2) // equal: used as it is
	err := b.AdoptEpoch(ctx(t), 1)
	if !errors.Is(err, epoch.ErrFenced) || !strings.Contains(err.Error(), "epoch 2") || !strings.Contains(err.Error(), "epoch 1") {
		t.Fatalf("AdoptEpoch(1) on a store at 2 = %v, want fenced, naming both epochs", err)
	}
	adopt(t, b, 2) // the other engine's epoch, as after a clean release
	adopt(t, b, 5) // advanced past a gap
	if err := a.AdoptEpoch(ctx(t), 4); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("AdoptEpoch(4) on a store at 5 = %v, want fenced", err)
	}
}

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
		WantFenced(t, w.name, w.do(old), 1, 2)
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
	set, err := s.SetIfNotExists(ctx(t), key, []byte("v"), ttl)
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

// testHandoverInTurn is two engines on one store as a clean handover has them: the
// successor adopts the same epoch (both write: the designed overlap), then the next
// one, and from that moment the old engine's writes are refused.
func testHandoverInTurn(t *testing.T, open func(*testing.T) Fenced) {
	old, next := open(t), open(t)
	adopt(t, old, 1)
	check(t, "Set by the old engine", old.Set(ctx(t), "a", []byte("old"), 0))
	adopt(t, next, 1)
	check(t, "Set by the successor under the same epoch", next.Set(ctx(t), "b", []byte("next"), 0))
	check(t, "Set by the old engine during the overlap", old.Set(ctx(t), "a", []byte("old-2"), 0))
	set, err := old.SetIfNotExists(ctx(t), "c", []byte("old"), 0)
	if err != nil || !set {
		t.Fatalf("SetIfNotExists by the old engine during the overlap = %v, %v", set, err)
	}
	adopt(t, next, 2)
	WantFenced(t, "Set by the old engine after the bump", old.Set(ctx(t), "a", []byte("late"), 0), 1, 2)
	_, err = old.DeleteIfValueMatches(ctx(t), "c", []byte("old"))
	WantFenced(t, "DeleteIfValueMatches by the old engine after the bump", err, 1, 2)
	check(t, "Set by the successor", next.Set(ctx(t), "a", []byte("next"), 0))
	wantValue(t, next, "a", []byte("next"))
	wantValue(t, next, "c", []byte("old"))
}

// testAdoptionRace has engines adopt different epochs at once: the highest wins
// whatever the order, and only its writes commit; engines adopting the same epoch at
// once all succeed.
func testAdoptionRace(t *testing.T, open func(*testing.T) Fenced) {
	const n = 6
	stores := make([]Fenced, n)
	for i := range stores {
		stores[i] = open(t)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.AdoptEpoch(ctx(t), uint64(i+1)) })
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
		WantFenced(t, fmt.Sprintf("Set by the engine that adopted %d", i+1), s.Set(ctx(t), "k", []byte("lost"), 0), held, n)
	}
	check(t, "Set by the winner", stores[n-1].Set(ctx(t), "k", []byte("won"), 0))

	same := make([]Fenced, 4)
	for i := range same {
		same[i] = open(t)
	}
	for i, s := range same {
		wg.Go(func() { errs[i] = s.AdoptEpoch(ctx(t), n+1) })
	}
	wg.Wait()
	for i, s := range same {
		check(t, fmt.Sprintf("AdoptEpoch(%d) by engine %d of 4", n+1, i), errs[i])
		check(t, "Set", s.Set(ctx(t), fmt.Sprintf("same-%d", i), []byte("v"), 0))
	}
	wantValue(t, same[0], "k", []byte("won"))
}

// testOwnEpochMoves has one engine adopt its next epoch while its writes run: a write
// sent under the old one and refused is sent again under the new one, so none fails.
func testOwnEpochMoves(t *testing.T, open func(*testing.T) Fenced) {
	s := open(t)
	adopt(t, s, 1)
	const writers, each = 8, 20
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range each {
				key := fmt.Sprintf("w%d-%d", w, i)
				if w%2 == 0 {
					errs <- s.Set(ctx(t), key, []byte("v"), 0)
				} else {
					errs <- setNX(t, s, key, 0)
				}
			}
		})
	}
	close(start)
	adopt(t, s, 2)
	wg.Wait()
	close(errs)
	for err := range errs {
		check(t, "a write while this engine adopted its next epoch", err)
	}
	wantValue(t, s, fmt.Sprintf("w%d-%d", writers-1, each-1), []byte("v"))
}

// testNeverAdopted is a store that was never told an epoch: it writes while the store
// has none either (one engine, tests), and is refused once an engine adopted one.
func testNeverAdopted(t *testing.T, open func(*testing.T) Fenced) {
	plain, fenced := open(t), open(t)
	check(t, "Set before any epoch", plain.Set(ctx(t), "k", []byte("v"), 0))
	adopt(t, fenced, 1)
	WantFenced(t, "Set by a store that adopted no epoch", plain.Set(ctx(t), "k", []byte("w"), 0), 0, 1)
	wantValue(t, fenced, "k", []byte("v"))
}
