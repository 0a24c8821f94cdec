package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/examples/counter"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestAJobThatIgnoresItsContextKeepsTheLease is issue 26's finding 9 on jobs: a run
// that ignores its context past drain_seconds is cancelled at the drain deadline, and
// the engine keeps the lease (renewing it) until the run returns, so the standby starts
// the job only after the old run has ended. Before the fix the release went ahead at
// the deadline and the new holder ran the job beside the old run.
func TestAJobThatIgnoresItsContextKeepsTheLease(t *testing.T) {
	srv := natstest.Start(t)
	var aRunning atomic.Bool
	aStarted, release := make(chan struct{}, 1), make(chan struct{})
	ends := sync.OnceFunc(func() { close(release) })
	defer ends() // a failed test lets the run return, so the engine can end
	stubborn := engine.Job{Name: "sweep", Schedule: engine.Every(20 * time.Millisecond), Run: func(context.Context) error {
		aRunning.Store(true)
		defer aRunning.Store(false)
		select {
		case aStarted <- struct{}{}:
		default:
		}
		<-release // ignores its context on purpose
		return nil
	}}
	var overlaps atomic.Int64
	bRan := make(chan struct{}, 1)
	polite := engine.Job{Name: "sweep", Schedule: engine.Every(20 * time.Millisecond), Run: func(context.Context) error {
		if aRunning.Load() {
			overlaps.Add(1)
		}
		select {
		case bRan <- struct{}{}:
		default:
		}
		return nil
	}}
	ca := cfg(t, srv.URL(), "serve", "v1", "jetstream")
	ca.NATS.Engine.DrainSeconds = 1
	core, logs := observer.New(zap.WarnLevel)
	a := newEngine(t, ca, engine.WithJob(stubborn), engine.WithLogger(zap.New(core)))
	load(t, a)
	b := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"), engine.WithJob(polite))
	load(t, b)
	testwait.Recv(t, aStarted, 10*time.Second, "the old engine's run")

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- a.Shutdown(ctx)
	}()
	// Either the old engine says it keeps the lease for the run (the fix), or the new
	// holder runs the job (the bug).
	held := func() bool { return logs.FilterMessageSnippet("keeps the lease until it returns").Len() > 0 }
	testwait.For(t, 15*time.Second, "the old engine keeping the lease for its run, or the new one running the job",
		func() bool { return held() || len(bRan) > 0 })
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("the new holder ran the job %d times while the old engine's run was still going", n)
	}
	if h := leaseRecord(t, srv.URL()).Holder.InstanceID; h != a.InstanceID() {
		t.Fatalf("the lease is held by %q while the old engine's run goes on; want the old engine %s", h, a.InstanceID())
	}
	if b.State() != engine.StateStandby {
		t.Fatalf("the standby is %s while the old engine's run goes on", b.State())
	}

	ends()
	if err := testwait.Recv(t, shut, 20*time.Second, "the old engine's handover"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	testwait.For(t, 10*time.Second, "the new engine serving", func() bool { return b.State() == engine.StateServing })
	testwait.Recv(t, bRan, 10*time.Second, "a run on the new engine")
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("the new holder ran the job %d times while the old engine's run was still going", n)
	}
}

// TestAShutdownCutShortKeepsTheLeaseOfARunningJob: when Shutdown's ctx ends while a
// job's run still ignores its cancel, the engine ends without releasing the lease: a
// released lease is taken at once, and the next holder would start the job beside the
// run. Unreleased, it lapses, and the next holder advances the epoch as it takes it.
func TestAShutdownCutShortKeepsTheLeaseOfARunningJob(t *testing.T) {
	srv := natstest.Start(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	ends := sync.OnceFunc(func() { close(release) })
	defer ends()
	stubborn := engine.Job{Name: "sweep", Schedule: engine.Every(20 * time.Millisecond), Run: func(context.Context) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release // ignores its context on purpose
		return nil
	}}
	c := cfg(t, srv.URL(), "serve", "", "memory")
	c.NATS.Engine.DrainSeconds = 1
	a := newEngine(t, c, engine.WithJob(stubborn))
	load(t, a)
	testwait.Recv(t, started, 10*time.Second, "the run")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := a.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown returned no error although its ctx ended with a job's run going on")
	}
	if r := leaseRecord(t, srv.URL()); r.Free() || r.Holder.InstanceID != a.InstanceID() {
		t.Fatalf("after Shutdown with a job's run going on, the lease is %+v; want it left to the old engine (unreleased)", r)
	}
}

// TestAFencedJobsWritesAreRefusedByTheEpoch: at a fence the lease can be taken over
// while a run that ignores its cancel goes on, so the run's writes are what is fenced:
// its ctx carries the epoch it started under (CallEpoch), the successor advances the
// epoch before its own runs, and a store that checks the epoch (examples/counter's)
// refuses the stale run's write. Every increment acknowledged is in the counter.
func TestAFencedJobsWritesAreRefusedByTheEpoch(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := counter.OpenJetStream(ctx, js, "JOB_COUNTERS")
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		epoch uint64
		ok    bool
	}
	aStarted, release, aWrote := make(chan started, 1), make(chan struct{}), make(chan error, 1)
	ends := sync.OnceFunc(func() { close(release) })
	defer ends()
	var aRuns, acked atomic.Int64
	stubborn := engine.Job{Name: "count", Schedule: engine.Every(20 * time.Millisecond), Run: func(ctx context.Context) error {
		n, ok := engine.CallEpoch(ctx)
		if aRuns.Add(1) > 1 {
			return nil
		}
		aStarted <- started{n, ok}
		<-release // ignores its context on purpose
		_, err := store.Incr(context.Background(), "c", 1, n)
		aWrote <- err
		if err == nil {
			acked.Add(1)
		}
		return err
	}}
	bRan := make(chan struct{}, 1)
	var bEpoch atomic.Uint64
	polite := engine.Job{Name: "count", Schedule: engine.Every(20 * time.Millisecond), Run: func(ctx context.Context) error {
		n, _ := engine.CallEpoch(ctx)
		bEpoch.Store(n)
		if _, err := store.Incr(ctx, "c", 1, n); err != nil {
			return err
		}
		acked.Add(1)
		select {
		case bRan <- struct{}{}:
		default:
		}
		return nil
	}}
	a := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"), engine.WithJob(stubborn))
	load(t, a)
	b := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"), engine.WithJob(polite))
	load(t, b)
	got := testwait.Recv(t, aStarted, 10*time.Second, "the old engine's run")
	if !got.ok || got.epoch == 0 || got.epoch != a.Epoch() {
		t.Fatalf("a job's CallEpoch = %d, %v; want the engine's epoch %d", got.epoch, got.ok, a.Epoch())
	}

	// Another engine's value on the key: the holder is evicted, reads it, and has lost;
	// its run goes on. That engine never renews, so the standby takes over a lease later.
	leases, err := jetstreamstore.Open(ctx, natstest.Connect(t, srv.URL()), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gone := lease.ThisProcess(strings.Repeat("e", 32), "test", "vgone", time.Now())
	if _, err := leases.Put(ctx, gone.Encode()); err != nil {
		t.Fatal(err)
	}
	testwait.Closed(t, a.Done(), 20*time.Second, "the evicted engine has ended")
	testwait.Recv(t, bRan, 20*time.Second, "a run on the new holder")
	if n := bEpoch.Load(); n <= got.epoch {
		t.Fatalf("the new holder's run carries epoch %d, not above the old run's %d", n, got.epoch)
	}
	ends()
	if err := testwait.Recv(t, aWrote, 10*time.Second, "the old run's write"); !errors.Is(err, counter.ErrStale) {
		t.Fatalf("the old run's write under epoch %d after a takeover at %d: %v; want it refused (counter.ErrStale)", got.epoch, bEpoch.Load(), err)
	}
	ctxB, cancelB := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelB()
	if err := b.Shutdown(ctxB); err != nil {
		t.Fatal(err)
	}
	if v, err := store.Get(ctx, "c"); err != nil || v != acked.Load() {
		t.Fatalf("counter = %d (%v); want the %d increments acknowledged", v, err, acked.Load())
	}
}
