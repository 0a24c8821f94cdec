package lease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
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
		prep  func(s *MemStore) // the lease as the claim finds it
		start time.Duration     // when the claim starts: the write is sent at 0
	}{
		{name: "free lease", prep: func(*MemStore) {}},
		{name: "takeover of a silent holder", prep: func(s *MemStore) { s.Put(holder("dead", "")) }, start: -lease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := NewMemStore()
			tc.prep(store)
			m, err := NewMachine(Config{Me: holder("me", ""), Lease: lease, StandbyTimeout: standby})
			if err != nil {
				t.Fatal(err)
			}
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
				m.Done(t0.Add(readDone), Result{ID: out.Op.ID})
			}
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
			store := NewMemStore()
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
