package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/lease/leasetest"
)

// These tests run the ownership tree against a real broker with a lease of about a
// second. Their bounds are the lease rules themselves (lease/2, one lease period), with
// the slack a loaded machine needs; they never measure speed.

var bucketN atomic.Int64

// jsStore opens a fresh lease bucket on its own connection, as an engine's lease does.
func jsStore(t *testing.T, url, bucket string, replicas int) *jetstreamstore.Store {
	t.Helper()
	nc := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{Bucket: bucket, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newBucket() string { return fmt.Sprintf("ABI_ENGINE_A%d", bucketN.Add(1)) }

func TestBrokerFreeLeaseIsTakenAndRenewed(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucket()
	a := startNode(t, jsStore(t, srv.URL(), bucket, 1), leasetest.Holder("a", ""))
	a.waitState(lease.StateServing, testLease)
	observer := jsStore(t, srv.URL(), bucket, 1)
	first := read(t, observer).Revision
	// Watch the revisions for one lease period: at least two renewals land.
	w, err := observer.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	end := time.After(testLease)
	var last uint64
	for done := false; !done; {
		select {
		case r := <-w.Updates():
			last = r.Revision
		case <-end:
			done = true
		}
	}
	if last < first+2 {
		t.Fatalf("revision moved %d -> %d in one lease period, want at least two renewals", first, last)
	}
}

func TestBrokerSecondEngineIsRefused(t *testing.T) {
	srv := natstest.Start(t)
	for _, rollout := range []string{"", "v1"} {
		t.Run("rollout "+rollout, func(t *testing.T) {
			bucket := newBucket()
			a := startNode(t, jsStore(t, srv.URL(), bucket, 1), leasetest.Holder("a", rollout))
			a.waitState(lease.StateServing, testLease)
			store := jsStore(t, srv.URL(), bucket, 1)
			before := read(t, store).Holder
			start := time.Now()
			b := startNode(t, store, leasetest.Holder("b", rollout))
			ctx, cancel := context.WithTimeout(context.Background(), 3*testLease)
			defer cancel()
			_, err := b.o.Claim(ctx)
			var as *lease.AlreadyServingError
			if !errors.As(err, &as) || as.Holder.InstanceID != "engine-a" {
				t.Fatalf("Claim = %v, want AlreadyServingError naming a", err)
			}
			// A live holder renews every lease/4: the refusal comes within about lease/2.
			if took := time.Since(start); took > testLease*3/4 {
				t.Fatalf("refused after %s, want about lease/2", took)
			}
			if got := read(t, store).Holder; got != before {
				t.Fatalf("record changed to %v", got)
			}
			if s := a.o.Status().State; s != lease.StateServing {
				t.Fatalf("the holder is %v", s)
			}
		})
	}
}

func TestBrokerDeadHolderIsTakenOverAfterOneLease(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucket()
	a := startNode(t, jsStore(t, srv.URL(), bucket, 1), leasetest.Holder("a", ""))
	a.waitState(lease.StateServing, testLease)
	b := startNode(t, jsStore(t, srv.URL(), bucket, 1), leasetest.Holder("b", ""))
	// b watches a live holder first; a then dies without releasing.
	ctx, cancel := context.WithTimeout(context.Background(), testLease)
	defer cancel()
	if _, err := b.o.WaitFor(ctx, func(s Status) bool { return s.Holder.InstanceID == "engine-a" }); err != nil {
		t.Fatal(err)
	}
	a.stop()
	// Silence starts with a's last renewal, which was sent no later than this.
	lastRenewal := a.o.Status().LastRenewed
	b.waitState(lease.StateServing, 3*testLease)
	if silent := time.Since(lastRenewal); silent < testLease*9/10 {
		t.Fatalf("took over %s after the holder's last renewal, before 0.9 lease", silent)
	}
}

func TestBrokerStandbyTakesOverOnReleaseAndTimesOut(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucket()
	a := startNode(t, jsStore(t, srv.URL(), bucket, 1), leasetest.Holder("a", "v1"))
	a.waitState(lease.StateServing, testLease)
	start := time.Now()
	b := startNodeWith(t, jsStore(t, srv.URL(), bucket, 1), lease.Config{
		Me: leasetest.Holder("b", "v2"), Lease: testLease, StandbyTimeout: 30 * time.Second})
	b.waitState(lease.StateStandby, testLease)
	if took := time.Since(start); took > testLease/2 {
		t.Fatalf("stood by after %s, want at once", took)
	}
	released := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.o.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitState(lease.StateServing, 2*testLease)
	if took := time.Since(released); took > testLease/2 {
		t.Fatalf("took over %s after the release, want a few hundred ms", took)
	}

	// A second standby behind b gives up after its timeout, counted from when it stood
	// by, which is after this.
	store := jsStore(t, srv.URL(), bucket, 1)
	st := time.Now()
	c := startNodeWith(t, store, lease.Config{
		Me: leasetest.Holder("c", "v3"), Lease: testLease, StandbyTimeout: 2 * testLease})
	c.waitState(lease.StateStandby, testLease)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*testLease)
	defer wcancel()
	s, err := c.o.WaitFor(wctx, func(s Status) bool { return s.Err != nil })
	var ste *lease.StandbyTimeoutError
	if err != nil || !errors.As(s.Err, &ste) || ste.Holder.InstanceID != "engine-b" {
		t.Fatalf("standby ended with %v, %v", s.Err, err)
	}
	if took := time.Since(st); took < 2*testLease {
		t.Fatalf("gave up after %s, before its timeout", took)
	}
}

func TestBrokerStopFencesAndServesAgain(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucket()
	a := startNode(t, jsStore(t, srv.URL(), bucket, 1), leasetest.Holder("a", ""))
	a.waitState(lease.StateServing, testLease)
	srv.Stop()
	a.waitState(lease.StateFenced, 2*testLease)
	fencedAt := time.Now()
	if late := fencedAt.Sub(a.o.Status().LastRenewed); late > testLease/2+testLease/4 {
		t.Fatalf("fenced %s after the last successful renewal was sent, want about lease/2", late)
	}
	if a.o.Gate().Valid() {
		t.Fatal("gate open while fenced")
	}
	srv.Restart()
	a.waitState(lease.StateServing, 20*time.Second)
	if !a.o.Gate().Valid() {
		t.Fatal("gate closed after serving again")
	}
}

func TestBrokerCutOffHolderFencesBeforeTakeoverThenIsLost(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucket()
	cut := leasetest.NewFlaky(jsStore(t, srv.URL(), bucket, 1))
	a := startNode(t, cut, leasetest.Holder("a", "v1"))
	a.waitState(lease.StateServing, testLease)
	b := startNode(t, jsStore(t, srv.URL(), bucket, 1), leasetest.Holder("b", "v2"))
	b.waitState(lease.StateStandby, testLease)
	cut.Fail(true)
	a.waitState(lease.StateFenced, testLease)
	fenced := time.Now()
	b.waitState(lease.StateServing, 3*testLease)
	if gap := time.Since(fenced); gap < testLease/4 {
		t.Fatalf("takeover %s after the fence, want at least lease/4", gap)
	}
	cut.Fail(false)
	a.waitState(lease.StateLost, 2*testLease)
}

func TestBrokerLostReplyDeletedLeaseAndRelease(t *testing.T) {
	srv := natstest.Start(t)
	t.Run("lost reply keeps the lease", func(t *testing.T) {
		bucket := newBucket()
		flaky := leasetest.NewFlaky(jsStore(t, srv.URL(), bucket, 1))
		a := startNode(t, flaky, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, testLease)
		flaky.LoseNextUpdateReply()
		rev := read(t, flaky).Revision
		ctx, cancel := context.WithTimeout(context.Background(), 3*testLease)
		defer cancel()
		// Wait for renewals past the lost one (two revisions: the lost reply's and ours).
		w, err := flaky.Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for r := range w.Updates() {
			if r.Revision >= rev+3 {
				break
			}
		}
		for _, r := range a.rolesNow() {
			if _, ok := r.(Fenced); ok {
				t.Fatalf("fenced after a lost reply: %v", a.rolesNow())
			}
		}
		if s := a.o.Status().State; s != lease.StateServing {
			t.Fatalf("state %v", s)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		if _, err := a.o.Release(rctx); err != nil {
			t.Fatal(err)
		}
		if r := read(t, flaky); !r.Free() {
			t.Fatalf("after release: %v", r)
		}
	})
	t.Run("deleted lease is taken again", func(t *testing.T) {
		bucket := newBucket()
		store := jsStore(t, srv.URL(), bucket, 1)
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, testLease)
		outside := jsStore(t, srv.URL(), bucket, 1)
		if err := outside.Delete(context.Background(), read(t, outside).Revision); err != nil {
			t.Fatal(err)
		}
		waitRecord(t, outside, func(r lease.Record) bool { return r.Holder.InstanceID == "engine-a" })
		// The delete fenced it at once (its watch saw it); the create it won serves again.
		a.waitState(lease.StateServing, testLease)
		var fenced bool
		for _, r := range a.rolesNow() {
			_, ok := r.(Fenced)
			fenced = fenced || ok
		}
		if !fenced {
			t.Fatalf("roles %v: the delete did not fence the holder", a.rolesNow())
		}
	})
	t.Run("release never deletes another's lease", func(t *testing.T) {
		bucket := newBucket()
		store := jsStore(t, srv.URL(), bucket, 1)
		a := startNode(t, store, leasetest.Holder("a", ""))
		a.waitState(lease.StateServing, testLease)
		if _, err := store.Put(context.Background(), leasetest.Holder("thief", "").Encode()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := a.o.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if r := read(t, store); r.Holder.InstanceID != "engine-thief" {
			t.Fatalf("record %v", r)
		}
	})
}

// waitRecord waits, through the store's own watch, until the record satisfies ok.
func waitRecord(t *testing.T, s lease.Store, ok func(lease.Record) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*testLease)
	defer cancel()
	w, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for r := range w.Updates() {
		if ok(r) {
			return
		}
	}
	t.Fatal("record never reached the expected state")
}

func TestBrokerKilledChildrenAreSurvived(t *testing.T) {
	srv := natstest.Start(t)
	for _, name := range []string{RenewerName, FencerName, ContenderName} {
		t.Run(name, func(t *testing.T) {
			bucket := newBucket()
			store := jsStore(t, srv.URL(), bucket, 1)
			a := startNode(t, store, leasetest.Holder("a", ""))
			a.waitState(lease.StateServing, testLease)
			rev := read(t, store).Revision
			for range 3 {
				a.e.Send(a.o.Child(name), Kill{Reason: "test"})
			}
			waitRecord(t, store, func(r lease.Record) bool { return r.Revision >= rev+4 })
			for _, r := range a.rolesNow() {
				if _, ok := r.(Fenced); ok {
					t.Fatalf("fenced after killing the %s", name)
				}
			}
		})
	}
}

// TestBrokerClusterLeaderLoss kills the node leading the lease bucket's stream under a
// serving engine and a standby: the holder may fence (if the new leader takes long) but
// the two never serve at once outside the lease rules, and one of them serves after.
func TestBrokerClusterLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster takes seconds to elect")
	}
	c := natstest.StartCluster(t)
	bucket := newBucket()
	a := startNode(t, jsStore(t, c.URLs(), bucket, 3), leasetest.Holder("a", "v1"))
	a.waitState(lease.StateServing, 5*testLease)
	b := startNode(t, jsStore(t, c.URLs(), bucket, 3), leasetest.Holder("b", "v2"))
	b.waitState(lease.StateStandby, 5*testLease)
	leader := c.StreamLeader("KV_" + bucket)
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	c.Nodes[leader].Stop()
	lossAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One of them serves again, and stays so for two more lease periods.
	if _, err := a.o.WaitFor(ctx, func(s Status) bool {
		return s.State == lease.StateServing || b.o.Status().State == lease.StateServing
	}); err != nil {
		t.Fatalf("nobody serves after the leader loss: a %v, b %v", a.o.Status().State, b.o.Status().State)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 2*testLease)
	defer wcancel()
	_, _ = a.o.WaitFor(wctx, func(Status) bool { return false })
	// The serving intervals of a and b, as their role broadcasts tell, never overlap.
	ia, ib := servingIntervals(a), servingIntervals(b)
	for _, x := range ia {
		for _, y := range ib {
			if x[0].Before(y[1]) && y[0].Before(x[1]) {
				t.Fatalf("a served %v..%v and b %v..%v (leader lost at %v)", x[0], x[1], y[0], y[1], lossAt)
			}
		}
	}
}

// servingIntervals are the spans between a Serving broadcast and the next role that
// ends it; an open span ends now.
func servingIntervals(n *node) [][2]time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out [][2]time.Time
	var start time.Time
	for i, r := range n.roles {
		switch r.(type) {
		case Serving:
			if start.IsZero() {
				start = n.roledAt[i]
			}
		case Fenced, Lost, Released:
			if !start.IsZero() {
				out = append(out, [2]time.Time{start, n.roledAt[i]})
				start = time.Time{}
			}
		}
	}
	if !start.IsZero() {
		out = append(out, [2]time.Time{start, time.Now()})
	}
	return out
}
