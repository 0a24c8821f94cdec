package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/abi-engine/engine/lease"
)

// runEpoch is the contract's part on the epoch record (docs/design.md §4.7): created at
// revision 0, changed only by compare-and-swap on its revision, independent of the
// lease record, watched like it.
func runEpoch(t *testing.T, newStore func(t *testing.T) lease.Store) {
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), waitBound)
		t.Cleanup(cancel)
		return c
	}
	a := Holder("a", "")
	first := lease.EpochRecord{Epoch: 1, InstanceID: a.InstanceID, State: lease.EpochServing}
	mustRead := func(t *testing.T, s lease.Store) lease.EpochRecord {
		t.Helper()
		e, err := s.ReadEpoch(ctx(t))
		if err != nil {
			t.Fatalf("ReadEpoch: %v", err)
		}
		return e
	}
	mustWrite := func(t *testing.T, s lease.Store, e lease.EpochRecord, rev uint64) uint64 {
		t.Helper()
		next, err := s.WriteEpoch(ctx(t), e, rev)
		if err != nil {
			t.Fatalf("WriteEpoch(%v at %d): %v", e, rev, err)
		}
		if next == 0 || next <= rev {
			t.Fatalf("WriteEpoch at %d returned revision %d", rev, next)
		}
		return next
	}
	same := func(got, want lease.EpochRecord, rev uint64) bool {
		want.Revision = rev
		return got == want
	}

	t.Run("empty store has no epoch record", func(t *testing.T) {
		if e := mustRead(t, newStore(t)); !e.None() || e != (lease.EpochRecord{}) {
			t.Fatalf("ReadEpoch = %v, want none", e)
		}
	})
	t.Run("a write at revision 0 creates the record", func(t *testing.T) {
		s := newStore(t)
		rev := mustWrite(t, s, first, 0)
		if e := mustRead(t, s); !same(e, first, rev) {
			t.Fatalf("ReadEpoch = %v, want %v at revision %d", e, first, rev)
		}
	})
	t.Run("a write at revision 0 conflicts while a record exists", func(t *testing.T) {
		s := newStore(t)
		rev := mustWrite(t, s, first, 0)
		second := lease.EpochRecord{Epoch: 2, InstanceID: "engine-b", State: lease.EpochServing}
		if _, err := s.WriteEpoch(ctx(t), second, 0); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("second create = %v, want ErrConflict", err)
		}
		if e := mustRead(t, s); !same(e, first, rev) {
			t.Fatalf("record changed: %v", e)
		}
	})
	t.Run("a write at the current revision moves it; a stale one conflicts", func(t *testing.T) {
		s := newStore(t)
		rev := mustWrite(t, s, first, 0)
		draining := first
		draining.State = lease.EpochDraining
		next := mustWrite(t, s, draining, rev)
		bumped := lease.EpochRecord{Epoch: 2, InstanceID: "engine-b", State: lease.EpochServing}
		if _, err := s.WriteEpoch(ctx(t), bumped, rev); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("write at the stale revision %d = %v, want ErrConflict", rev, err)
		}
		if e := mustRead(t, s); !same(e, draining, next) {
			t.Fatalf("ReadEpoch = %v, want %v at %d", e, draining, next)
		}
		last := mustWrite(t, s, bumped, next)
		if e := mustRead(t, s); !same(e, bumped, last) {
			t.Fatalf("ReadEpoch = %v, want %v at %d", e, bumped, last)
		}
	})
	t.Run("a write at a revision conflicts while there is no record", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.WriteEpoch(ctx(t), first, 7); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("write at revision 7 of nothing = %v, want ErrConflict", err)
		}
		if e := mustRead(t, s); !e.None() {
			t.Fatalf("the conflicting write created %v", e)
		}
	})
	t.Run("the epoch record and the lease leave each other alone", func(t *testing.T) {
		s := newStore(t)
		rev, err := s.Create(ctx(t), a)
		if err != nil {
			t.Fatal(err)
		}
		erev := mustWrite(t, s, first, 0)
		if r, err := s.Read(ctx(t)); err != nil || r.Revision != rev || r.Holder != a {
			t.Fatalf("lease after an epoch write = %v, %v; want revision %d held by a", r, err, rev)
		}
		next, err := s.Update(ctx(t), a, rev)
		if err != nil {
			t.Fatalf("renewal after an epoch write: %v", err)
		}
		if err := s.Delete(ctx(t), next); err != nil {
			t.Fatalf("release after an epoch write: %v", err)
		}
		if e := mustRead(t, s); !same(e, first, erev) {
			t.Fatalf("epoch record after the lease's writes = %v, want %v at %d", e, first, erev)
		}
	})
	t.Run("the epoch watch delivers the current record, then every change", func(t *testing.T) {
		s := newStore(t)
		rev := mustWrite(t, s, first, 0)
		w, err := s.WatchEpoch(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		next := func(want lease.EpochRecord, wantRev uint64, what string) {
			t.Helper()
			timeout := time.After(waitBound)
			for {
				select {
				case e, ok := <-w.Updates():
					if !ok {
						t.Fatalf("watch closed waiting for %s", what)
					}
					if same(e, want, wantRev) {
						return
					}
				case <-timeout:
					t.Fatalf("no %s within %s", what, waitBound)
				}
			}
		}
		next(first, rev, "current record")
		drained := first
		drained.State = lease.EpochDrained
		rev = mustWrite(t, s, drained, rev)
		next(drained, rev, "the drained record")
		// A lease write is no news of the epoch; the next epoch write is.
		if _, err := s.Create(ctx(t), a); err != nil {
			t.Fatal(err)
		}
		bumped := lease.EpochRecord{Epoch: 2, InstanceID: "engine-b", State: lease.EpochServing}
		rev = mustWrite(t, s, bumped, rev)
		next(bumped, rev, "the bumped record")
		w.Stop()
		for range w.Updates() {
			// drain to the close
		}
	})
}
