package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
)

// TestLostCreateReplyCountsFromTheSend pins item 8 of issue 9: a create whose reply was
// lost, found ours by the read after it, holds since the create was sent, not since the
// read: the fence and the next renewal are due that much earlier.
func TestLostCreateReplyCountsFromTheSend(t *testing.T) {
	ctx := context.Background()
	const (
		createSent = 0
		replyLost  = renew / 2 // the create's call is cut off
		readDone   = renew/2 + 20*time.Millisecond
	)
	for _, tc := range []struct {
		name  string
		prep  func(s *leasetest.MemStore) // the lease as the claim finds it
		start time.Duration               // when the claim starts: the write is sent at 0
	}{
		{name: "free lease", prep: func(*leasetest.MemStore) {}},
		{name: "takeover of a silent holder", prep: func(s *leasetest.MemStore) { s.Put(holder("dead", "")) }, start: -lease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := leasetest.NewMemStore()
			tc.prep(store)
			m := newMachine(t, Config{Me: holder("me", ""), Lease: lease, StandbyTimeout: standby})
			start := t0.Add(tc.start)
			out := m.Start(start)
			rec, _ := store.Read(ctx)
			out = m.Done(start, Result{ID: out.Op.ID, Record: rec})
			if out.Op == nil && m.Watching() {
				out = m.Tick(t0) // silent for a lease: the takeover read
				rec, _ = store.Read(ctx)
				out = m.Done(t0, Result{ID: out.Op.ID, Record: rec})
			}
			if out.Op == nil || (out.Op.Kind != OpCreate && out.Op.Kind != OpUpdate) {
				t.Fatalf("want the write that takes the lease, got %+v", out.Op)
			}
			write := *out.Op
			// It lands at createSent; its reply is lost.
			var err error
			if write.Kind == OpCreate {
				_, err = store.Create(ctx, write.Holder)
			} else {
				_, err = store.Update(ctx, write.Holder, write.Revision)
			}
			if err != nil {
				t.Fatal(err)
			}
			out = m.Done(t0.Add(replyLost), Result{ID: write.ID, Err: errors.New("timeout: reply lost")})
			if out.Op == nil || out.Op.Kind != OpRead {
				t.Fatalf("after the lost reply: %+v, want a read", out.Op)
			}
			rec, _ = store.Read(ctx)
			out = m.Done(t0.Add(readDone), Result{ID: out.Op.ID, Record: rec})
			if out.Op != nil && out.Op.Kind == OpPublish {
				out = m.Done(t0.Add(readDone), Result{ID: out.Op.ID})
			}
			epochOps(m, store, t0.Add(readDone), out)
			if m.State() != StateServing {
				t.Fatalf("state %v, want serving", m.State())
			}
			sent := t0.Add(createSent)
			if got := m.LastRenewed(); !got.Equal(sent) {
				t.Errorf("LastRenewed = %v after the write was sent, want 0 (when it was sent)", got.Sub(t0))
			}
			d := m.Deadlines()
			if !d.Fence.Equal(sent.Add(fence)) || !d.Renew.Equal(sent.Add(renew)) {
				t.Errorf("Deadlines() = fence %v, renew %v after the send; want %v, %v",
					d.Fence.Sub(t0), d.Renew.Sub(t0), fence, renew)
			}
		})
	}
}

// TestStandbysRaceForAReleasedLease pins item 9 of issue 9 at the machine: standbys of
// two rollouts wait while v1 serves; on its release one takes the lease. A standby of
// the winner's rollout is refused, naming it (its engine must end); one of another
// rollout keeps standing by, now watching the new holder.
func TestStandbysRaceForAReleasedLease(t *testing.T) {
	for _, order := range [][]string{{"v2", "v2", "v3"}, {"v3", "v2", "v2"}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			store := leasetest.NewMemStore()
			old := newSim(t, store, holder("old", "v1"))
			old.start()
			sims := []*sim{old}
			for i, rollout := range order {
				s := newSim(t, store, holder(fmt.Sprintf("%s-%d", rollout, i), rollout))
				s.start()
				if s.m.State() != StateStandby {
					t.Fatalf("%s: state %v, want standby", s.m.Config().Me.InstanceID, s.m.State())
				}
				sims = append(sims, s)
			}
			tick := run(t, sims...)
			tick(lease)
			old.apply(old.m.Release(old.now))
			tick(lease + 50*time.Millisecond)
			rec, _ := store.Read(context.Background())
			var winner *sim
			for _, s := range sims[1:] {
				if s.m.State() == StateServing {
					if winner != nil {
						t.Fatalf("two serve: %s and %s", winner.m.Config().Me.InstanceID, s.m.Config().Me.InstanceID)
					}
					winner = s
				}
			}
			if winner == nil || rec.Holder != winner.m.Config().Me {
				t.Fatalf("nobody serves after the release (record %v)", rec)
			}
			won := winner.m.Config().Me
			tick(standby - lease) // long after, before any standby timeout
			for _, s := range sims[1:] {
				me := s.m.Config().Me
				switch {
				case s == winner:
					if s.m.State() != StateServing {
						t.Errorf("winner %s: %v", me.InstanceID, s.m.State())
					}
				case me.RolloutID == won.RolloutID:
					var as *AlreadyServingError
					if !errors.As(s.err, &as) || as.Holder != won || s.m.State() != StateIdle {
						t.Errorf("%s (the winner's rollout): state %v, err %v; want refused naming %s", me.InstanceID, s.m.State(), s.err, won.InstanceID)
					}
				default:
					if s.m.State() != StateStandby || s.err != nil || s.m.Seen().Holder != won {
						t.Errorf("%s (another rollout): state %v, err %v, watching %v; want standing by for the winner",
							me.InstanceID, s.m.State(), s.err, s.m.Seen().Holder.InstanceID)
					}
				}
			}
		})
	}
}

// TestStandbyRetriesAFailedTakeoverRead: a standby whose takeover read fails waits the
// retry, not the takeover deadline that has passed, and takes over once the store
// answers; a store that stays away ends the standby at its timeout. Before the
// retry-wait sub-states, the machine kept reporting the past takeover deadline, which a
// tick did nothing about, so a driver that arms each timer once (the ownership actor)
// never woke again.
func TestStandbyRetriesAFailedTakeoverRead(t *testing.T) {
	t.Run("the store comes back", func(t *testing.T) {
		store := leasetest.NewMemStore()
		store.Put(holder("old", "v1")) // a holder that died without releasing
		me := newSim(t, store, holder("me", "v2"))
		me.start()
		me.at(lease - time.Millisecond)
		me.failing = true
		me.at(lease) // the takeover read fails
		if me.m.State() != StateStandby || me.m.SubState().String() != "standby-retry-wait" {
			t.Fatalf("after a failed takeover read: %v (%v), want standby, waiting to retry", me.m.State(), me.m.SubState())
		}
		if d := me.m.Deadlines(); !d.Takeover.IsZero() || !d.Retry.Equal(t0.Add(lease+renew)) {
			t.Fatalf("Deadlines() = %+v: want the retry, not the takeover that is past", d)
		}
		me.failing = false
		me.at(lease + renew)
		if me.m.State() != StateServing {
			t.Fatalf("after the retry: %v (log %v), want serving", me.m.State(), me.log)
		}
	})
	t.Run("the store stays away", func(t *testing.T) {
		store := leasetest.NewMemStore()
		store.Put(holder("old", "v1"))
		me := newSim(t, store, holder("me", "v2"))
		me.start()
		me.failing = true
		me.at(standby + renew)
		var ste *StandbyTimeoutError
		if !errors.As(me.err, &ste) {
			t.Fatalf("err = %v (state %v, log %v), want the standby timeout", me.err, me.m.State(), me.log)
		}
	})
}

// TestRefusedClaimStaysRefused: a claim refused while it waited to retry a failed read
// never starts again (before the sub-states, the pending retry read the lease after the
// refusal, and the claim went on).
func TestRefusedClaimStaysRefused(t *testing.T) {
	other := holder("other", "")
	m := newMachine(t, Config{Me: holder("me", ""), Lease: lease, StandbyTimeout: standby})
	out := m.Start(t0)
	out = m.Done(t0, Result{ID: out.Op.ID, Record: Record{Holder: other, Revision: 1}}) // watch it
	out = m.Tick(t0.Add(lease))                                                         // silent: the takeover read
	out = m.Done(t0.Add(lease), Result{ID: out.Op.ID, Err: errors.New("broker away")})  // a retry is due
	out = m.Observe(t0.Add(lease), Record{Holder: other, Revision: 2})                  // it renewed: refused
	var as *AlreadyServingError
	if !errors.As(m.Err(), &as) || out.Role.Kind != RoleClaimFailed {
		t.Fatalf("err %v, role %v: want refused", m.Err(), out.Role.Kind)
	}
	out = m.Tick(t0.Add(3 * lease))
	if m.State() != StateIdle || out.Op != nil || m.InFlight() != nil || !m.Deadlines().Next().IsZero() {
		t.Fatalf("after the refusal: state %v, op %v, deadlines %+v: want refused for good", m.State(), out.Op, m.Deadlines())
	}
}
