package lease

import (
	"context"
	"errors"
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
