package objtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
	"github.com/abi-engine/engine/primaries/objectstorage"
)

// Fenced is an object_storage backend that engines share and that fences their writes
// by the epoch (docs/architecture.md "Epoch"): the JetStream backend.
type Fenced interface {
	objectstorage.Store
	AdoptEpoch(ctx context.Context, epoch uint64) error
}

// RunEpoch runs the epoch contract of a shared backend, as kvtest.RunEpoch does for
// keyvalue. newShared is called once per subtest with fresh, empty shared storage and
// returns open, which opens one more store on it each time it is called, as another
// engine does.
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

func testAdoptionRule(t *testing.T, open func(*testing.T) Fenced) {
	a, b := open(t), open(t)
	adopt(t, a, 2)
	adopt(t, a, 2)
	if err := b.AdoptEpoch(ctx(t), 1); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("AdoptEpoch(1) on a store at 2 = %v, want fenced", err)
	}
	adopt(t, b, 2)
	adopt(t, b, 3)
	if err := a.AdoptEpoch(ctx(t), 2); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("AdoptEpoch(2) on a store at 3 = %v, want fenced", err)
	}
}

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
		kvtest.WantFenced(t, w.name, w.do(old), 1, 2)
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

func testHandoverInTurn(t *testing.T, open func(*testing.T) Fenced) {
	old, next := open(t), open(t)
	adopt(t, old, 1)
	check(t, "PutObject by the old engine", old.PutObject(ctx(t), "", "a", []byte("old")))
	adopt(t, next, 1)
	check(t, "PutObject by the successor under the same epoch", next.PutObject(ctx(t), "", "b", []byte("next")))
	check(t, "PutObject by the old engine during the overlap", old.PutObject(ctx(t), "", "a", []byte("old-2")))
	adopt(t, next, 2)
	kvtest.WantFenced(t, "PutObject by the old engine after the bump", old.PutObject(ctx(t), "", "a", []byte("late")), 1, 2)
	kvtest.WantFenced(t, "DeleteObject by the old engine after the bump", old.DeleteObject(ctx(t), "", "b"), 1, 2)
	check(t, "PutObject by the successor", next.PutObject(ctx(t), "", "a", []byte("next")))
	wantContent(t, next, "", "a", []byte("next"))
	wantContent(t, next, "", "b", []byte("next"))
}

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
		held := uint64(i + 1)
		if errs[i] != nil {
			held = 0
		}
		kvtest.WantFenced(t, fmt.Sprintf("PutObject by the engine that adopted %d", i+1), s.PutObject(ctx(t), "", "k", []byte("lost")), held, n)
	}
	check(t, "PutObject by the winner", stores[n-1].PutObject(ctx(t), "", "k", []byte("won")))
	wantContent(t, stores[0], "", "k", []byte("won"))
}

func testOwnEpochMoves(t *testing.T, open func(*testing.T) Fenced) {
	s := open(t)
	adopt(t, s, 1)
	const writers, each = 6, 8
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range each {
				errs <- s.PutObject(ctx(t), "w", fmt.Sprintf("%d-%d", w, i), []byte("v"))
			}
		})
	}
	close(start)
	adopt(t, s, 2)
	wg.Wait()
	close(errs)
	for err := range errs {
		check(t, "a put while this engine adopted its next epoch", err)
	}
	wantContent(t, s, "w", fmt.Sprintf("%d-%d", writers-1, each-1), []byte("v"))
}

func testNeverAdopted(t *testing.T, open func(*testing.T) Fenced) {
	plain, fenced := open(t), open(t)
	check(t, "PutObject before any epoch", plain.PutObject(ctx(t), "", "k", []byte("v")))
	adopt(t, fenced, 1)
	kvtest.WantFenced(t, "PutObject by a store that adopted no epoch", plain.PutObject(ctx(t), "", "k", []byte("w")), 0, 1)
	wantContent(t, fenced, "", "k", []byte("v"))
}
