// Package leasetest is the contract every lease.Store passes (Run: the lease record, the
// holder's period and the epoch record), and the stores the tests of what drives a
// store use: MemStore, a Store in memory, and Flaky, a Store wrapper that fails or
// loses replies on demand.
//
// It is exported so that a store written elsewhere can prove itself with
//
//	func TestContract(t *testing.T) {
//		leasetest.Run(t, func(t *testing.T) lease.Store { return newStore(t) })
//	}
package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/abi-engine/engine/lease"
)

// Holder is the contract's holder fixture.
func Holder(name, rollout string) lease.Holder {
	return lease.Holder{InstanceID: "engine-" + name, Host: "host-" + name, PID: 1000,
		Version: "1.2.3", RolloutID: rollout, StartedAt: "2026-10-06T10:00:00Z"}
}

// waitBound bounds every wait in the contract. It is a ceiling for a broken store,
// never a speed the contract expects.
const waitBound = 10 * time.Second

// Run runs the contract against fresh stores made by newStore, one per case.
func Run(t *testing.T, newStore func(t *testing.T) lease.Store) {
	a, b := Holder("a", ""), Holder("b", "v2")
	ctx := func(t *testing.T) context.Context {
		c, cancel := context.WithTimeout(context.Background(), waitBound)
		t.Cleanup(cancel)
		return c
	}
	mustCreate := func(t *testing.T, s lease.Store, h lease.Holder) uint64 {
		t.Helper()
		rev, err := s.Create(ctx(t), h)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if rev == 0 {
			t.Fatal("Create returned revision 0")
		}
		return rev
	}
	mustRead := func(t *testing.T, s lease.Store) lease.Record {
		t.Helper()
		r, err := s.Read(ctx(t))
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		return r
	}

	t.Run("empty store has no record", func(t *testing.T) {
		if r := mustRead(t, newStore(t)); !r.Free() {
			t.Fatalf("Read = %v, want free", r)
		}
	})
	t.Run("create records the holder with a revision", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		if r := mustRead(t, s); r.Revision != rev || r.Holder != a {
			t.Fatalf("Read = %v, want revision %d held by a", r, rev)
		}
	})
	t.Run("create fails while a record exists", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		_, err := s.Create(ctx(t), b)
		if !errors.Is(err, lease.ErrTaken) || !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("second Create = %v, want ErrTaken", err)
		}
		if r := mustRead(t, s); r.Revision != rev || r.Holder != a {
			t.Fatalf("record changed: %v", r)
		}
	})
	t.Run("update at the current revision moves it forward", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		next, err := s.Update(ctx(t), b, rev)
		if err != nil || next <= rev {
			t.Fatalf("Update = %d, %v; want > %d", next, err, rev)
		}
		if r := mustRead(t, s); r.Revision != next || r.Holder != b {
			t.Fatalf("Read = %v", r)
		}
	})
	t.Run("update with the same holder still moves the revision", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		next, err := s.Update(ctx(t), a, rev)
		if err != nil || next <= rev {
			t.Fatalf("Update = %d, %v; want > %d", next, err, rev)
		}
	})
	t.Run("update at a stale revision conflicts", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		next, err := s.Update(ctx(t), a, rev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx(t), b, rev); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("stale Update = %v, want ErrConflict", err)
		}
		if r := mustRead(t, s); r.Holder != a || r.Revision != next {
			t.Fatalf("record changed: %v", r)
		}
	})
	t.Run("update of a missing record conflicts", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Update(ctx(t), a, 1); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("Update of nothing = %v, want ErrConflict", err)
		}
		if r := mustRead(t, s); !r.Free() {
			t.Fatalf("Update of nothing created %v", r)
		}
	})
	t.Run("update of a deleted record conflicts", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		if err := s.Delete(ctx(t), rev); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx(t), a, rev); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("Update after delete = %v, want ErrConflict", err)
		}
	})
	t.Run("delete at the current revision frees the lease", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		if err := s.Delete(ctx(t), rev); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if r := mustRead(t, s); !r.Free() {
			t.Fatalf("Read after delete = %v", r)
		}
		if again := mustCreate(t, s, b); again <= rev {
			t.Fatalf("Create after delete = revision %d, want > %d", again, rev)
		}
	})
	t.Run("delete at a stale revision conflicts and keeps the record", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		next, err := s.Update(ctx(t), a, rev)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx(t), rev); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("stale Delete = %v, want ErrConflict", err)
		}
		if err := s.Delete(ctx(t), 0); !errors.Is(err, lease.ErrConflict) {
			t.Fatalf("Delete at revision 0 = %v, want ErrConflict (never unconditional)", err)
		}
		if r := mustRead(t, s); r.Revision != next || r.Holder != a {
			t.Fatalf("record changed: %v", r)
		}
	})
	t.Run("watch delivers the current record, then every change", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		w, err := s.Watch(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		next := func(want func(lease.Record) bool, what string) lease.Record {
			t.Helper()
			timeout := time.After(waitBound)
			for {
				select {
				case r, ok := <-w.Updates():
					if !ok {
						t.Fatalf("watch closed waiting for %s", what)
					}
					if want(r) {
						return r
					}
				case <-timeout:
					t.Fatalf("no %s within %s", what, waitBound)
				}
			}
		}
		next(func(r lease.Record) bool { return r.Revision == rev && r.Holder == a }, "current record")
		upd, err := s.Update(ctx(t), b, rev)
		if err != nil {
			t.Fatal(err)
		}
		next(func(r lease.Record) bool { return r.Revision == upd && r.Holder == b }, "update")
		if err := s.Delete(ctx(t), upd); err != nil {
			t.Fatal(err)
		}
		next(func(r lease.Record) bool { return r.Free() && r.Freed > upd }, "delete carrying its revision (Freed)")
		again := mustCreate(t, s, a)
		next(func(r lease.Record) bool { return r.Revision == again }, "create")
		w.Stop()
		for range w.Updates() {
			// drain to the close
		}
	})
	t.Run("publish puts the holder's period beside the record", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		if r := mustRead(t, s); r.HolderLease() != 0 {
			t.Fatalf("Read before any publish = %v with period %+v, want none", r, r.Period)
		}
		p := lease.Period{InstanceID: a.InstanceID, Lease: 40 * time.Second}
		if err := s.Publish(ctx(t), p); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		r := mustRead(t, s)
		if r.Period != p || r.HolderLease() != p.Lease {
			t.Fatalf("Read = %v with period %+v, want %+v", r, r.Period, p)
		}
		if r.Revision != rev || r.Holder != a {
			t.Fatalf("Publish changed the record: %v, want revision %d held by a", r, rev)
		}
		// The holder's next renewal still finds the record at its revision.
		if _, err := s.Update(ctx(t), a, rev); err != nil {
			t.Fatalf("Update after Publish: %v", err)
		}
		p2 := lease.Period{InstanceID: a.InstanceID, Lease: 6 * time.Second}
		if err := s.Publish(ctx(t), p2); err != nil {
			t.Fatal(err)
		}
		if r := mustRead(t, s); r.Period != p2 {
			t.Fatalf("second Publish: period %+v, want %+v", r.Period, p2)
		}
	})
	t.Run("a period another engine published is not the holder's", func(t *testing.T) {
		s := newStore(t)
		rev := mustCreate(t, s, a)
		if err := s.Publish(ctx(t), lease.Period{InstanceID: b.InstanceID, Lease: 40 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if r := mustRead(t, s); r.HolderLease() != 0 || r.Revision != rev {
			t.Fatalf("Read = %v with period %+v: want a's record with no period of its own", r, r.Period)
		}
		if err := s.Delete(ctx(t), rev); err != nil {
			t.Fatal(err)
		}
		if r := mustRead(t, s); !r.Free() || r.HolderLease() != 0 {
			t.Fatalf("Read of a free lease = %v with period %+v", r, r.Period)
		}
	})
	runEpoch(t, newStore)
}
