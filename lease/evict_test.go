package lease_test

import (
	"context"
	"slices"
	"testing"

	. "github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// serving is a machine that took a free lease in store at t0 and serves.
func serving(t *testing.T, store *leasetest.MemStore) *sim {
	t.Helper()
	me := newSim(t, store, holder("me", ""))
	me.start()
	if me.m.State() != StateServing || !me.m.Watching() {
		t.Fatalf("state %v, watching %v: want serving and watching its own key", me.m.State(), me.m.Watching())
	}
	return me
}

func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind.String())
	}
	return out
}

// TestHolderIsEvictedByAWriteNotItsOwn pins item 3 of issue 9: while holding, the
// machine watches its own key; any record it did not write fences it at once (not at
// the next renewal), and a read decides what follows by the usual rules.
func TestHolderIsEvictedByAWriteNotItsOwn(t *testing.T) {
	ctx := context.Background()
	other := holder("other", "")
	tests := []struct {
		name  string
		write func(s *leasetest.MemStore, rev uint64) Record // the outside write; returns what the watch delivers
		want  State                                          // after the read that follows
		lost  Holder                                         // whom it is lost to
	}{
		{name: "delete", want: StateServing, write: func(s *leasetest.MemStore, rev uint64) Record {
			if err := s.Delete(ctx, rev); err != nil {
				t.Fatal(err)
			}
			return s.Watched()
		}},
		{name: "key gone without a marker", want: StateServing, write: func(s *leasetest.MemStore, rev uint64) Record {
			if err := s.Delete(ctx, rev); err != nil {
				t.Fatal(err)
			}
			return Record{}
		}},
		{name: "another engine's value", want: StateLost, lost: other, write: func(s *leasetest.MemStore, _ uint64) Record {
			s.Put(other)
			return s.Watched()
		}},
		{name: "a value naming no engine", want: StateLost, write: func(s *leasetest.MemStore, _ uint64) Record {
			s.Put(Holder{})
			return s.Watched()
		}},
		{name: "delete, then another engine creates it first", want: StateLost, lost: other, write: func(s *leasetest.MemStore, rev uint64) Record {
			if err := s.Delete(ctx, rev); err != nil {
				t.Fatal(err)
			}
			freed := s.Watched()
			if _, err := s.Create(ctx, other); err != nil {
				t.Fatal(err)
			}
			return freed
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := leasetest.NewMemStore()
			me := serving(t, store)
			me.at(renew + renew/2) // between two renewals: the next one is lease/8 away
			rec := tt.write(store, me.m.Revision())
			out := me.m.Observe(me.now, rec)
			if got := kinds(out.Events); !slices.Equal(got, []string{"evicted"}) {
				t.Fatalf("events %v, want [evicted]", got)
			}
			if me.m.State() != StateFenced {
				t.Fatalf("state right after the write = %v, want fenced", me.m.State())
			}
			if out.Op == nil || out.Op.Kind != OpRead || out.Op.Purpose != PurposeRenewal {
				t.Fatalf("op %+v, want a renewal's read", out.Op)
			}
			me.log = nil
			me.apply(out)
			if me.m.State() != tt.want {
				t.Fatalf("state after the read = %v, want %v (log %v)", me.m.State(), tt.want, me.log)
			}
			got, _ := store.Read(ctx)
			switch tt.want {
			case StateServing:
				if got.Holder != me.m.Config().Me || !slices.Contains(me.log, "restored") {
					t.Fatalf("record %v, log %v: want it created again by us, serving again", got, me.log)
				}
			case StateLost:
				if got.Holder == me.m.Config().Me || !slices.Contains(me.log, "lost") {
					t.Fatalf("record %v, log %v", got, me.log)
				}
			}
			if n := len(slices.DeleteFunc(slices.Clone(me.log), func(k string) bool { return k != "evicted" })); n != 1 {
				t.Fatalf("evicted reported %d times: %v", n, me.log)
			}
		})
	}
}

func TestHolderIgnoresItsOwnAndOlderRecords(t *testing.T) {
	ctx := context.Background()
	store := leasetest.NewMemStore()
	old := holder("old", "")
	store.Put(old)
	if err := store.Delete(ctx, 1); err != nil { // released: revision 2 is its delete
		t.Fatal(err)
	}
	me := serving(t, store)
	rev := me.m.Revision()
	// A renewal of ours landed; its reply is still on its way.
	next, err := store.Update(ctx, me.m.Config().Me, rev)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []Record{
		{Holder: me.m.Config().Me, Revision: next},
		{Holder: me.m.Config().Me, Revision: rev},
		{Holder: old, Revision: 1}, // the holder before us, delivered late
		{Freed: 2},                 // its release, delivered late
	} {
		out := me.m.Observe(me.now, rec)
		if len(out.Events) != 0 || out.Op != nil || me.m.State() != StateServing {
			t.Fatalf("Observe(%v) = %+v, state %v: want nothing", rec, out, me.m.State())
		}
	}
}

func TestOwnReleaseIsNoEviction(t *testing.T) {
	ctx := context.Background()
	store := leasetest.NewMemStore()
	me := serving(t, store)
	out := me.m.Release(me.now)
	if out.Op == nil || out.Op.Kind != OpWriteEpoch || out.Op.Epoch.State != EpochDraining {
		t.Fatalf("Release = %+v, want the epoch marked draining", out.Op)
	}
	out = epochOps(me.m, store, me.now, out)
	if out.Op == nil || out.Op.Kind != OpDelete {
		t.Fatalf("after the mark: %+v, want a delete", out.Op)
	}
	if me.m.Watching() {
		t.Fatal("still watching during the release")
	}
	if err := store.Delete(ctx, out.Op.Revision); err != nil {
		t.Fatal(err)
	}
	// The watch delivers our own delete before the delete's reply arrives.
	if o := me.m.Observe(me.now, store.Watched()); len(o.Events) != 0 || o.Op != nil || me.m.State() != StateServing {
		t.Fatalf("our own delete: %+v, state %v", o, me.m.State())
	}
	done := me.m.Done(me.now, Result{ID: out.Op.ID})
	if got := kinds(done.Events); !slices.Equal(got, []string{"released"}) || me.m.State() != StateReleased {
		t.Fatalf("events %v, state %v", got, me.m.State())
	}
}

// A renewal sent before the eviction proves nothing about the lease after it: it does
// not make the holder serve again; the read after it decides.
func TestRenewalSentBeforeAnEvictionDoesNotRestore(t *testing.T) {
	ctx := context.Background()
	store := leasetest.NewMemStore()
	me := serving(t, store)
	at := t0.Add(renew)
	out := me.m.Tick(at)
	if out.Op == nil || out.Op.Kind != OpUpdate {
		t.Fatalf("Tick at the renewal = %+v", out.Op)
	}
	renewal := *out.Op
	next, err := store.Update(ctx, renewal.Holder, renewal.Revision)
	if err != nil {
		t.Fatal(err)
	}
	store.Put(holder("other", ""))
	if o := me.m.Observe(at, store.Watched()); me.m.State() != StateFenced || o.Op != nil {
		t.Fatalf("with the renewal in flight: %+v, state %v; want fenced, nothing new to run", o, me.m.State())
	}
	out = me.m.Done(at, Result{ID: renewal.ID, Rev: next})
	if me.m.State() != StateFenced || out.Op == nil || out.Op.Kind != OpRead {
		t.Fatalf("after the renewal's success: %+v, state %v; want still fenced, and a read", out.Op, me.m.State())
	}
	me.now = at
	me.apply(out)
	if me.m.State() != StateLost {
		t.Fatalf("state %v (log %v), want lost", me.m.State(), me.log)
	}
}

func TestEvictedWhileFencedThenBrokerBack(t *testing.T) {
	store := leasetest.NewMemStore()
	me := serving(t, store)
	me.failing = true
	me.at(fence + renew/2)
	if me.m.State() != StateFenced {
		t.Fatalf("state %v", me.m.State())
	}
	if err := store.Delete(context.Background(), me.m.Revision()); err != nil {
		t.Fatal(err)
	}
	me.log = nil
	me.at(fence + renew) // the watch shows the delete; the reads still fail
	if !slices.Contains(me.log, "evicted") || me.m.State() != StateFenced {
		t.Fatalf("log %v, state %v", me.log, me.m.State())
	}
	me.failing = false
	me.at(lease)
	if rec, _ := store.Read(context.Background()); me.m.State() != StateServing || rec.Holder != me.m.Config().Me {
		t.Fatalf("state %v, record %v (log %v)", me.m.State(), rec, me.log)
	}
}
