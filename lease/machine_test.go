package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// The fixture's times, as the internal tests (fixture_test.go) name them: a 1 s lease
// renews every 250 ms and fences after 500 ms.
const (
	lease   = time.Second
	renew   = lease / 4
	fence   = lease / 2
	standby = 5 * time.Second
	drain   = 2*lease + renew/2 // the fixture's drain_seconds (no renewal falls on it): how long a bump may be deferred
)

var t0 = time.Date(2026, 10, 6, 10, 0, 0, 0, time.UTC)

// holder is the fixture's engine, the store contract's: engine-name on host-name.
var holder = leasetest.Holder

// newMachine fails t if its machine ever made a move the transition table does not
// allow, or broke one of its invariants.
var newMachine = NewCheckedMachine

// sim drives a Machine against a MemStore on a virtual clock, the way the ownership
// actor does: it runs each op at once (unless told to fail or lose replies), delivers
// what a watch would see, and ticks at the machine's deadlines.
type sim struct {
	t         *testing.T
	m         *Machine
	store     *leasetest.MemStore
	now       time.Time
	log       []string
	err       error
	seenRev   uint64
	seenEpoch uint64 // the epoch record's revision the epoch watch last delivered
	failing   bool   // every store call fails with an unknown outcome
	loseNext  bool   // the next update lands but its reply is lost
}

func newSim(t *testing.T, store *leasetest.MemStore, me Holder) *sim {
	t.Helper()
	return newSimWith(t, store, Config{Me: me, Lease: lease, StandbyTimeout: standby})
}

func newSimWith(t *testing.T, store *leasetest.MemStore, cfg Config) *sim {
	t.Helper()
	return &sim{t: t, m: newMachine(t, cfg), store: store, now: t0, seenRev: ^uint64(0)}
}

func (s *sim) apply(out Output) {
	for {
		for _, e := range out.Events {
			s.log = append(s.log, e.Kind.String())
		}
		if out.Role.Kind == RoleClaimFailed {
			s.err = out.Role.Err
		}
		if out.Op == nil {
			return
		}
		out = s.m.Done(s.now, s.run(*out.Op))
	}
}

func (s *sim) run(op Op) Result {
	ctx := context.Background()
	res := Result{ID: op.ID}
	if s.failing {
		res.Err = errors.New("broker unreachable")
		return res
	}
	switch op.Kind {
	case OpRead:
		res.Record, res.Err = s.store.Read(ctx)
	case OpCreate:
		res.Rev, res.Err = s.store.Create(ctx, op.Holder)
	case OpUpdate:
		res.Rev, res.Err = s.store.Update(ctx, op.Holder, op.Revision)
		if s.loseNext && res.Err == nil {
			s.loseNext = false
			res = Result{ID: op.ID, Err: errors.New("timeout: reply lost")}
		}
	case OpDelete:
		res.Err = s.store.Delete(ctx, op.Revision)
	case OpPublish:
		res.Err = s.store.Publish(ctx, op.Period)
	case OpReadEpoch:
		res.Epoch, res.Err = s.store.ReadEpoch(ctx)
	case OpWriteEpoch:
		res.Rev, res.Err = s.store.WriteEpoch(ctx, op.Epoch, op.Revision)
	}
	return res
}

// advance moves the clock to `until`, stepping through every deadline and delivering
// watch records when the store's revision moves, as a watch would.
func (s *sim) advance(until time.Time) {
	for {
		if s.m.Watching() {
			rec := s.store.Watched()
			if key := max(rec.Revision, rec.Freed); key != s.seenRev {
				s.seenRev = key
				s.apply(s.m.Observe(s.now, rec))
				continue
			}
		} else {
			s.seenRev = ^uint64(0)
		}
		if s.m.WatchingEpoch() {
			if rec := s.watchedEpoch(); rec.Revision != s.seenEpoch {
				s.seenEpoch = rec.Revision
				s.apply(s.m.ObserveEpoch(s.now, rec))
				continue
			}
		} else {
			s.seenEpoch = 0
		}
		next := s.m.Deadlines().Next()
		if next.IsZero() || next.After(until) {
			s.now = until
			return
		}
		if next.After(s.now) {
			s.now = next
		}
		before := s.m.State()
		s.apply(s.m.Tick(s.now))
		if s.m.Deadlines().Next().Equal(next) && s.m.State() == before && s.m.InFlight() == nil {
			s.t.Fatalf("machine made no progress at %v (state %v)", s.now.Sub(t0), s.m.State())
		}
	}
}

// watchedEpoch is the epoch record as a watch delivers it: the store's.
func (s *sim) watchedEpoch() EpochRecord {
	rec, err := s.store.ReadEpoch(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return rec
}

func (s *sim) start() { s.apply(s.m.Start(s.now)) }

func (s *sim) at(d time.Duration) { s.advance(t0.Add(d)) }

// run returns a function that advances every machine together to a point in time.
func run(t *testing.T, sims ...*sim) func(d time.Duration) {
	return func(d time.Duration) {
		// Interleave the machines in small steps so they share one timeline.
		end := t0.Add(d)
		for now := sims[0].now; !now.After(end); now = now.Add(10 * time.Millisecond) {
			for _, s := range sims {
				s.advance(now)
			}
		}
	}
}

func TestFreeLeaseIsTakenAtOnceAndRenewed(t *testing.T) {
	store := leasetest.NewMemStore()
	me := newSim(t, store, holder("me", ""))
	me.start()
	if got := me.m.State(); got != StateServing {
		t.Fatalf("state after start = %v, want serving", got)
	}
	rec, _ := store.Read(context.Background())
	if rec.Holder != me.m.Config().Me {
		t.Fatalf("holder = %v, want me", rec.Holder)
	}
	first := rec.Revision
	me.at(lease)
	rec, _ = store.Read(context.Background())
	if rec.Revision < first+2 {
		t.Fatalf("revision after one lease = %d, want >= %d", rec.Revision, first+2)
	}
	if me.m.State() != StateServing {
		t.Fatalf("state = %v, want serving", me.m.State())
	}
}

func TestStartRules(t *testing.T) {
	tests := []struct {
		name        string
		holder      Holder
		renews      bool
		me          Holder
		want        State
		wantErr     bool
		wantBetween [2]time.Duration // when the outcome is reached
	}{
		{name: "live holder, no rollout", holder: holder("other", ""), renews: true, me: holder("me", ""), want: StateIdle, wantErr: true, wantBetween: [2]time.Duration{0, fence}},
		{name: "live holder, same rollout", holder: holder("other", "v1"), renews: true, me: holder("me", "v1"), want: StateIdle, wantErr: true, wantBetween: [2]time.Duration{0, fence}},
		{name: "live holder, other rollout", holder: holder("other", "v1"), renews: true, me: holder("me", "v2"), want: StateStandby, wantBetween: [2]time.Duration{0, 0}},
		{name: "holder without rollout, rollout stands by", holder: holder("other", ""), renews: true, me: holder("me", "v2"), want: StateStandby, wantBetween: [2]time.Duration{0, 0}},
		{name: "dead holder is taken over", holder: holder("other", ""), renews: false, me: holder("me", ""), want: StateServing, wantBetween: [2]time.Duration{lease * 9 / 10, lease + renew}},
		{name: "foreign value is taken over", holder: Holder{}, renews: false, me: holder("me", ""), want: StateServing, wantBetween: [2]time.Duration{lease * 9 / 10, lease + renew}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := leasetest.NewMemStore()
			store.Put(tt.holder)
			me := newSim(t, store, tt.me)
			me.start()
			var reached time.Duration = -1
			for d := time.Duration(0); d <= 3*lease; d += 10 * time.Millisecond {
				if tt.renews && d%renew == 0 && d > 0 {
					rec, _ := store.Read(context.Background())
					if rec.Holder == tt.holder {
						if _, err := store.Update(context.Background(), tt.holder, rec.Revision); err != nil {
							t.Fatal(err)
						}
					}
				}
				me.at(d)
				if reached < 0 && (me.m.State() == tt.want && (tt.want != StateIdle || me.err != nil)) {
					reached = d
				}
			}
			if me.m.State() != tt.want && reached < 0 {
				t.Fatalf("state = %v, want %v (log %v)", me.m.State(), tt.want, me.log)
			}
			if reached < tt.wantBetween[0] || reached > tt.wantBetween[1] {
				t.Fatalf("reached %v at %v, want within %v", tt.want, reached, tt.wantBetween)
			}
			if tt.wantErr {
				var as *AlreadyServingError
				if !errors.As(me.err, &as) || as.Holder != tt.holder {
					t.Fatalf("err = %v, want AlreadyServingError naming the holder", me.err)
				}
				if !errors.Is(me.err, ErrOwnership) {
					t.Fatal("AlreadyServingError does not match ErrOwnership")
				}
				for _, part := range []string{"host-other", "pid 1000", "1.2.3", "since 2026-10-06T10:00:00Z", "ABI_ROLLOUT_ID"} {
					if !strings.Contains(me.err.Error(), part) {
						t.Errorf("message %q lacks %q", me.err, part)
					}
				}
				rec, _ := store.Read(context.Background())
				if rec.Holder != tt.holder {
					t.Fatalf("holder changed to %v", rec.Holder)
				}
			}
		})
	}
}

func TestStandbyTakesOverOnReleaseAndAfterSilence(t *testing.T) {
	t.Run("release", func(t *testing.T) {
		store := leasetest.NewMemStore()
		old := newSim(t, store, holder("old", "v1"))
		old.start()
		me := newSim(t, store, holder("me", "v2"))
		me.start()
		if me.m.State() != StateStandby {
			t.Fatalf("state = %v, want standby", me.m.State())
		}
		tick := run(t, old, me)
		tick(2 * lease)
		if me.m.State() != StateStandby || old.m.State() != StateServing {
			t.Fatalf("before release: me %v, old %v", me.m.State(), old.m.State())
		}
		old.apply(old.m.Release(old.now))
		if old.m.State() != StateReleased {
			t.Fatalf("old after release = %v", old.m.State())
		}
		tick(2*lease + 10*time.Millisecond)
		if me.m.State() != StateServing {
			t.Fatalf("standby after release = %v (log %v)", me.m.State(), me.log)
		}
	})
	t.Run("silence", func(t *testing.T) {
		store := leasetest.NewMemStore()
		store.Put(holder("old", "v1"))
		me := newSim(t, store, holder("me", "v2"))
		me.start()
		me.at(lease * 9 / 10)
		if me.m.State() != StateStandby {
			t.Fatalf("state at 0.9 lease = %v, want standby", me.m.State())
		}
		me.at(lease)
		if me.m.State() != StateServing {
			t.Fatalf("state at one lease = %v, want serving", me.m.State())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		store := leasetest.NewMemStore()
		old := newSim(t, store, holder("old", "v1"))
		old.start()
		me := newSim(t, store, holder("me", "v2"))
		me.start()
		run(t, old, me)(standby + lease)
		var ste *StandbyTimeoutError
		if !errors.As(me.err, &ste) || ste.Holder.InstanceID != "engine-old" {
			t.Fatalf("err = %v, want StandbyTimeoutError naming old", me.err)
		}
		if !strings.Contains(me.err.Error(), "engine-old on host-old") {
			t.Fatalf("message %q does not name the holder", me.err)
		}
		if me.m.Watching() {
			t.Fatal("still watching after the timeout")
		}
	})
	t.Run("own rollout first", func(t *testing.T) {
		store := leasetest.NewMemStore()
		store.Put(holder("old", "v1"))
		me := newSim(t, store, holder("me", "v2"))
		me.start()
		me.at(100 * time.Millisecond)
		store.Put(holder("twin", "v2"))
		me.at(200 * time.Millisecond)
		var as *AlreadyServingError
		if !errors.As(me.err, &as) || as.Holder.InstanceID != "engine-twin" {
			t.Fatalf("err = %v, want AlreadyServingError naming the twin", me.err)
		}
	})
}

func TestFencingAndRestore(t *testing.T) {
	store := leasetest.NewMemStore()
	me := newSim(t, store, holder("me", ""))
	me.start()
	me.at(renew) // one successful renewal, sent at 250 ms
	last := me.m.LastRenewed()
	me.failing = true
	me.at(renew + fence - time.Millisecond)
	if me.m.State() != StateServing {
		t.Fatalf("state before lease/2 of failures = %v", me.m.State())
	}
	me.at(renew + fence)
	if me.m.State() != StateFenced {
		t.Fatalf("state at lease/2 after the last success = %v, want fenced", me.m.State())
	}
	if got := me.m.LastRenewed(); !got.Equal(last) {
		t.Fatalf("LastRenewed moved while failing: %v", got)
	}
	me.failing = false
	me.at(2 * lease)
	if me.m.State() != StateServing {
		t.Fatalf("state after recovery = %v, want serving (log %v)", me.m.State(), me.log)
	}
	// acquired, renewed, then failures, one fence, more failures, then renewed+restored.
	got := strings.Join(me.log, ",")
	if !strings.HasPrefix(got, "acquired,epoch_bumped,renewed,renew_failed,") || strings.Count(got, "fenced") != 1 ||
		strings.Count(got, "restored") != 1 || strings.Index(got, "fenced") > strings.Index(got, "renewed,restored") {
		t.Fatalf("events = %v", me.log)
	}
}

func TestFencesBeforeAContenderCanTakeOver(t *testing.T) {
	store := leasetest.NewMemStore()
	me := newSim(t, store, holder("me", ""))
	me.start()
	other := newSim(t, store, holder("other", "v2"))
	other.start()
	tick := run(t, me, other)
	tick(lease)
	me.failing = true // cut off from the broker: renewals fail, the contender sees silence
	var fencedAt, tookAt time.Duration = -1, -1
	for d := lease; d <= 4*lease; d += 10 * time.Millisecond {
		tick(d)
		if fencedAt < 0 && me.m.State() == StateFenced {
			fencedAt = d
		}
		if tookAt < 0 && other.m.State() == StateServing {
			tookAt = d
		}
	}
	if fencedAt < 0 || tookAt < 0 {
		t.Fatalf("fenced at %v, took over at %v", fencedAt, tookAt)
	}
	if fencedAt > tookAt-renew {
		t.Fatalf("fenced at %v, less than lease/4 before the takeover at %v", fencedAt, tookAt)
	}
	me.failing = false
	tick(5 * lease)
	if me.m.State() != StateLost {
		t.Fatalf("old holder = %v, want lost (log %v)", me.m.State(), me.log)
	}
}

func TestRenewalWithLostReplyKeepsTheLease(t *testing.T) {
	store := leasetest.NewMemStore()
	me := newSim(t, store, holder("me", ""))
	me.start()
	me.loseNext = true
	me.at(3 * lease)
	if me.m.State() != StateServing {
		t.Fatalf("state = %v (log %v)", me.m.State(), me.log)
	}
	for _, e := range me.log {
		if e == "fenced" || e == "lost" {
			t.Fatalf("events %v", me.log)
		}
	}
	me.apply(me.m.Release(me.now))
	rec, _ := store.Read(context.Background())
	if !rec.Free() || me.m.State() != StateReleased {
		t.Fatalf("after release: %v, state %v", rec, me.m.State())
	}
}

func TestDeletedLeaseIsTakenAgain(t *testing.T) {
	store := leasetest.NewMemStore()
	me := newSim(t, store, holder("me", ""))
	me.start()
	rec, _ := store.Read(context.Background())
	if err := store.Delete(context.Background(), rec.Revision); err != nil {
		t.Fatal(err)
	}
	me.at(lease)
	rec, _ = store.Read(context.Background())
	if me.m.State() != StateServing || rec.Holder != me.m.Config().Me {
		t.Fatalf("state %v, record %v", me.m.State(), rec)
	}
}

func TestThiefMakesTheHolderLost(t *testing.T) {
	store := leasetest.NewMemStore()
	me := newSim(t, store, holder("me", ""))
	me.start()
	store.Put(holder("thief", ""))
	me.at(lease)
	if me.m.State() != StateLost {
		t.Fatalf("state = %v, want lost", me.m.State())
	}
	// Release never deletes another engine's lease.
	me.apply(me.m.Release(me.now))
	rec, _ := store.Read(context.Background())
	if rec.Holder.InstanceID != "engine-thief" {
		t.Fatalf("record after release = %v", rec)
	}
}

func TestReleaseRereadsOnConflictAndNeverDeletesAnother(t *testing.T) {
	t.Run("reply of the last renewal lost", func(t *testing.T) {
		store := leasetest.NewMemStore()
		me := newSim(t, store, holder("me", ""))
		me.start()
		me.loseNext = true
		me.at(renew) // the renewal lands, its reply is lost: our revision is stale
		me.apply(me.m.Release(me.now))
		rec, _ := store.Read(context.Background())
		if !rec.Free() {
			t.Fatalf("record after release = %v, want free", rec)
		}
	})
	t.Run("another holder", func(t *testing.T) {
		store := leasetest.NewMemStore()
		me := newSim(t, store, holder("me", ""))
		me.start()
		store.Put(holder("other", ""))
		me.apply(me.m.Release(me.now))
		rec, _ := store.Read(context.Background())
		if rec.Holder.InstanceID != "engine-other" || me.m.State() != StateReleased {
			t.Fatalf("record %v, state %v", rec, me.m.State())
		}
	})
	t.Run("standby and idle release without a delete", func(t *testing.T) {
		store := leasetest.NewMemStore()
		rev := store.Put(holder("old", "v1"))
		me := newSim(t, store, holder("me", "v2"))
		me.start()
		me.apply(me.m.Release(me.now))
		rec, _ := store.Read(context.Background())
		if rec.Revision != rev || me.m.State() != StateReleased || me.m.Watching() {
			t.Fatalf("record %v, state %v", rec, me.m.State())
		}
	})
}

func TestStaleResultsAreIgnored(t *testing.T) {
	m := newMachine(t, Config{Me: holder("me", ""), Lease: lease, StandbyTimeout: standby})
	out := m.Start(t0)
	if out.Op == nil || out.Op.Kind != OpRead {
		t.Fatalf("Start = %+v, want a read", out)
	}
	if got := m.Done(t0, Result{ID: out.Op.ID + 1}); got.Op != nil || m.InFlight() == nil {
		t.Fatalf("a stale result was taken: %+v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Me: holder("me", ""), Lease: 0, StandbyTimeout: time.Second},
		{Me: holder("me", ""), Lease: time.Second, StandbyTimeout: -1},
		{Lease: time.Second, StandbyTimeout: time.Second},
	} {
		if _, err := NewMachine(c); err == nil {
			t.Errorf("NewMachine(%+v) = nil error", c)
		}
	}
}

func TestStoreErrorsDuringClaimAreRetried(t *testing.T) {
	store := leasetest.NewMemStore()
	me := newSim(t, store, holder("me", ""))
	me.failing = true
	me.start()
	me.at(lease)
	if me.m.State() != StateIdle || me.err != nil {
		t.Fatalf("state %v err %v", me.m.State(), me.err)
	}
	me.failing = false
	me.at(lease + renew)
	if me.m.State() != StateServing {
		t.Fatalf("state after the broker is back = %v", me.m.State())
	}
}

func ExampleHolder_String() {
	fmt.Println(holder("a", "v2"))
	fmt.Println(Holder{})
	// Output:
	// engine-a on host-a (pid 1000, version 1.2.3, rollout v2, since 2026-10-06T10:00:00Z)
	// unknown on unknown host (pid 0, version unknown, rollout none, since unknown)
}

// epochOps runs the epoch calls out asks for against store, at now, and returns the
// first Output that asks for no epoch call.
func epochOps(m *Machine, store *leasetest.MemStore, now time.Time, out Output) Output {
	ctx := context.Background()
	for out.Op != nil && (out.Op.Kind == OpReadEpoch || out.Op.Kind == OpWriteEpoch) {
		res := Result{ID: out.Op.ID}
		if out.Op.Kind == OpReadEpoch {
			res.Epoch, res.Err = store.ReadEpoch(ctx)
		} else {
			res.Rev, res.Err = store.WriteEpoch(ctx, out.Op.Epoch, out.Op.Revision)
		}
		out = m.Done(now, res)
	}
	return out
}
