package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/leasetest"
	"github.com/anthdm/hollywood/actor"
)

// journal records what members are told, in order, across actors.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf(format, args...))
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...)
}

// member obeys the role messages the way a primary does, recording each, and
// draining after `work` of fake time.
func member(e *actor.Engine, name string, j *journal, store lease.Store, work time.Duration) *actor.PID {
	return memberStoppingIn(e, name, j, store, work, 0)
}

// memberStoppingIn is a member that answers Stop after `stop` of fake time.
func memberStoppingIn(e *actor.Engine, name string, j *journal, store lease.Store, work, stop time.Duration) *actor.PID {
	return e.SpawnFunc(func(c *actor.Context) {
		from := c.Sender()
		switch m := c.Message().(type) {
		case Serve:
			j.add("%s serve", name)
			c.Send(from, Accepting{From: c.PID(), On: true})
		case StopAccepting:
			rec, _ := store.Read(context.Background())
			j.add("%s stop-accepting (lease free: %v)", name, rec.Free())
			c.Send(from, Accepting{From: c.PID(), On: false})
			self, eng := c.PID(), c.Engine()
			if !m.Deadline.IsZero() {
				time.AfterFunc(work, func() { eng.Send(from, Drained{From: self}) })
			}
		case Stop:
			j.add("%s stop", name)
			if stop == 0 {
				c.Send(from, Down{From: c.PID()})
				return
			}
			self, eng := c.PID(), c.Engine()
			time.AfterFunc(stop, func() { eng.Send(from, Down{From: self}) })
		}
	}, name)
}

// slowDelete is a store whose deletes (and epoch writes) take a while: a release (and
// its marks of the epoch) that can be watched.
type slowDelete struct {
	lease.Store
	d time.Duration
}

func (s slowDelete) WriteEpoch(ctx context.Context, e lease.EpochRecord, rev uint64) (uint64, error) {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Store.WriteEpoch(ctx, e, rev)
}

func (s slowDelete) Delete(ctx context.Context, rev uint64) error {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Delete(ctx, rev)
}

func TestHandoverCascadeOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNode(t, store, leasetest.Holder("a", ""))
		var j journal
		ran := make(chan struct{}, 16)
		jobs, err := NewJobsHost([]Job{{Name: "tick", Schedule: Every(100 * time.Millisecond), Run: func(ctx context.Context) error {
			ran <- struct{}{}
			return nil
		}}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeJobs(t, jobs) })
		jobsPID := n.e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		p1 := member(n.e, "primary", &j, store, 50*time.Millisecond)
		p2 := member(n.e, "transfers", &j, store, 200*time.Millisecond)
		var phases []Phase
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Jobs: jobsPID, Members: []*actor.PID{p1, p2},
			Drain: time.Second, OnPhase: func(p Phase, d time.Duration) { phases = append(phases, p) }})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		<-ran // a job ran while serving
		if !runsWithin(ran, time.Second) {
			t.Fatal("jobs not running while serving")
		}
		if root.Phase() != PhaseRelaying {
			t.Fatalf("phase %s before the handover, want relaying", root.Phase())
		}
		start := time.Now()
		if err := root.Handover(context.Background()); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if root.Phase() != PhaseDone {
			t.Fatalf("phase %s after the handover, want done", root.Phase())
		}
		for len(ran) > 0 {
			<-ran // runs that finished during the handover
		}
		if runsWithin(ran, time.Second) {
			t.Fatal("jobs still scheduled after the handover")
		}
		if r := read(t, store); !r.Free() {
			t.Fatalf("lease after handover: %v", r)
		}
		// The slowest member drains in 200 ms; nobody waits for the 1 s deadline.
		if took < 200*time.Millisecond || took >= time.Second {
			t.Fatalf("handover took %s", took)
		}
		// Each member is told serve, then stop-accepting after the release, then stop;
		// members of one step may hear it in any order.
		got := j.all()
		rank := map[string]int{"serve": 0, "stop-accepting (lease free: true)": 1, "stop": 2}
		last, count := -1, map[int]int{}
		for _, line := range got {
			_, what, _ := strings.Cut(line, " ")
			r, ok := rank[what]
			if !ok || r < last {
				t.Fatalf("members were told %v: %q out of order", got, line)
			}
			last = r
			count[r]++
		}
		if count[0] != 2 || count[1] != 2 || count[2] != 2 {
			t.Fatalf("members were told %v", got)
		}
		if fmt.Sprint(phases) != fmt.Sprint([]Phase{PhaseJobs, PhaseRelease, PhaseDrain, PhaseSessions, PhaseStop, PhaseDrained}) {
			t.Fatalf("phases %v", phases)
		}
		if root.Err() != nil {
			t.Fatalf("Err after a handover = %v", root.Err())
		}
		<-n.e.Poison(jobsPID).Done()
		<-n.e.Poison(p1).Done()
		<-n.e.Poison(p2).Done()
		closeRoot(t, root)
	})
}

func TestDrainDeadlineStopsWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNode(t, store, leasetest.Holder("a", ""))
		var j journal
		stuck := member(n.e, "stuck", &j, store, time.Hour)
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{stuck}, Drain: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		start := time.Now()
		if err := root.Handover(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 300*time.Millisecond || took > 400*time.Millisecond {
			t.Fatalf("handover took %s, want the 300 ms drain deadline", took)
		}
		if got := j.all(); got[len(got)-1] != "stuck stop" {
			t.Fatalf("members were told %v", got)
		}
		<-n.e.Poison(stuck).Done()
		<-n.e.Poison(root.PID()).Done()
	})
}

func TestFencingStopsMembersAndJobsAtOnceAndLostEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		flaky := leasetest.NewFlaky(mem)
		n := startNode(t, flaky, leasetest.Holder("a", ""))
		var j journal
		ran := make(chan struct{}, 64)
		jobs, _ := NewJobsHost([]Job{{Name: "j", Schedule: Every(100 * time.Millisecond), Run: func(context.Context) error {
			ran <- struct{}{}
			return nil
		}}}, nil, nil)
		t.Cleanup(func() { closeJobs(t, jobs) })
		jobsPID := n.e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		p := member(n.e, "primary", &j, mem, 0)
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Jobs: jobsPID, Members: []*actor.PID{p}, Drain: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		synctest.Wait()
		flaky.Fail(true)
		n.waitState(lease.StateFenced, time.Second)
		synctest.Wait()
		for len(ran) > 0 {
			<-ran
		}
		if runsWithin(ran, 300*time.Millisecond) {
			t.Fatal("jobs run on a fenced engine")
		}
		flaky.Fail(false)
		n.waitState(lease.StateServing, time.Second)
		synctest.Wait()
		if !runsWithin(ran, time.Second) {
			t.Fatal("jobs did not restart after the fence ended")
		}
		mem.Put(leasetest.Holder("thief", ""))
		<-root.Ended()
		var lost *lease.LostError
		if !errors.As(root.Err(), &lost) || lost.Holder.InstanceID != "engine-thief" {
			t.Fatalf("Err = %v, want LostError naming the thief", root.Err())
		}
		synctest.Wait()
		// The thief's write fences at once (Stop), and the read after it finds the lease
		// lost (Stop again, and the end).
		want := []string{"primary serve", "primary stop", "primary serve", "primary stop", "primary stop"}
		if got := j.all(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("members were told %v, want %v", got, want)
		}
		for len(ran) > 0 {
			<-ran
		}
		if runsWithin(ran, time.Second) {
			t.Fatal("jobs run after the lease was lost")
		}
		<-n.e.Poison(jobsPID).Done()
		<-n.e.Poison(p).Done()
		<-n.e.Poison(root.PID()).Done()
	})
}

// Two standbys of one rollout wait for v1; on its release one takes the lease, and the
// other's engine ends with the refusal naming it (issue 9 item 9), as an engine refused
// at start does, instead of waiting in idle for good.
func TestStandbyBeatenToTheReleasedLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		old := startNode(t, store, leasetest.Holder("old", "v1"))
		old.waitState(lease.StateServing, time.Second)
		var nodes []*node
		var roots []*Root
		for _, name := range []string{"b1", "b2"} {
			n := startNode(t, store, leasetest.Holder(name, "v2"))
			n.waitState(lease.StateStandby, time.Second)
			root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { <-n.e.Poison(root.PID()).Done() })
			nodes, roots = append(nodes, n), append(roots, root)
		}
		if _, err := old.o.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(testLease)
		synctest.Wait()
		winner := read(t, store).Holder
		for i, n := range nodes {
			me := n.o.Status()
			ended := false
			select {
			case <-roots[i].Ended():
				ended = true
			default:
			}
			if winner.InstanceID == leasetest.Holder([]string{"b1", "b2"}[i], "v2").InstanceID {
				if me.State != lease.StateServing || ended {
					t.Fatalf("winner: state %v, ended %v", me.State, ended)
				}
				continue
			}
			var as *lease.AlreadyServingError
			if !ended || !errors.As(roots[i].Err(), &as) || as.Holder != winner {
				t.Fatalf("loser: state %v, ended %v, err %v; want the engine ended, naming %s", me.State, ended, roots[i].Err(), winner.InstanceID)
			}
		}
	})
}

// TestStateIsServingOnlyOnceEveryMemberServes is issue 10 item 2 at the root: a lease
// taken shows as serving only once every member has confirmed Serve, and until then as
// the state before it; a fence shows at once.
func TestStateIsServingOnlyOnceEveryMemberServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		flaky := leasetest.NewFlaky(mem)
		n := startNode(t, flaky, leasetest.Holder("a", ""))
		const subscribe = 100 * time.Millisecond // how long the slow member takes to serve
		slow := n.e.SpawnFunc(func(c *actor.Context) {
			from, self, eng := c.Sender(), c.PID(), c.Engine()
			switch c.Message().(type) {
			case Serve:
				time.AfterFunc(subscribe, func() { eng.Send(from, Accepting{From: self, On: true}) })
			case Stop:
				c.Send(from, Down{From: self})
			}
		}, "slow")
		fast := member(n.e, "fast", &journal{}, mem, 0)
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{slow, fast}, Drain: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		synctest.Wait()
		if s := root.State(); s != lease.StateIdle {
			t.Fatalf("root state %s while a member has not confirmed Serve, want idle", s)
		}
		start := time.Now()
		if err := root.WaitServing(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s, took := root.State(), time.Since(start); s != lease.StateServing || took != subscribe {
			t.Fatalf("root state %s after %s, want serving once the slow member confirmed (%s)", s, took, subscribe)
		}
		flaky.Fail(true)
		n.waitState(lease.StateFenced, time.Second)
		synctest.Wait()
		if s := root.State(); s != lease.StateFenced {
			t.Fatalf("root state %s after the fence, want fenced", s)
		}
		flaky.Fail(false)
		n.waitState(lease.StateServing, time.Second)
		synctest.Wait()
		if s := root.State(); s != lease.StateFenced {
			t.Fatalf("root state %s while the members serve again but have not confirmed, want fenced", s)
		}
		time.Sleep(subscribe)
		synctest.Wait()
		if s := root.State(); s != lease.StateServing {
			t.Fatalf("root state %s once every member confirmed again, want serving", s)
		}
		<-n.e.Poison(slow).Done()
		<-n.e.Poison(fast).Done()
		<-n.e.Poison(root.PID()).Done()
	})
}

// runsWithin reports whether a run is reported on ran within d of the bubble's time.
func runsWithin(ran <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ran:
		return true
	case <-timer.C:
		return false
	}
}

func closeRoot(t *testing.T, r *Root) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Error(err)
	}
}

func closeJobs(t *testing.T, h *JobsHost) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Error(err)
	}
}

// deadLetters records what was sent to target after it had stopped.
func deadLetters(e *actor.Engine, target *actor.PID) (stop func(), count func() int) {
	var mu sync.Mutex
	n := 0
	pid := e.SpawnFunc(func(c *actor.Context) {
		if d, ok := c.Message().(actor.DeadLetterEvent); ok && d.Target != nil && d.Target.Equals(target) {
			mu.Lock()
			n++
			mu.Unlock()
		}
	}, "deadletters")
	e.Subscribe(pid)
	return func() {
			e.Unsubscribe(pid)
			<-e.Poison(pid).Done()
		}, func() int {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return n
		}
}

// TestNoRootTimerOutlivesTheRoot: the root's timers (a member's Serve retry, a phase's
// deadline) stop with it: none fires at a root that is gone.
func TestNoRootTimerOutlivesTheRoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNode(t, store, leasetest.Holder("a", ""))
		// refuses to serve (a retry is due), and never drains (the drain deadline is due)
		refuser := n.e.SpawnFunc(func(c *actor.Context) {
			switch c.Message().(type) {
			case Serve:
				c.Send(c.Sender(), ServeFailed{From: c.PID(), Err: errors.New("broker away")})
			case StopAccepting:
				c.Send(c.Sender(), Accepting{From: c.PID(), On: false})
			}
		}, "refuser")
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{refuser}, Drain: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		stopWatch, letters := deadLetters(n.e, root.PID())
		defer stopWatch()
		n.waitState(lease.StateServing, time.Second)
		synctest.Wait() // ServeFailed arrived: the retry is armed
		closeRoot(t, root)
		time.Sleep(2 * serveRetry)
		if got := letters(); got != 0 {
			t.Fatalf("%d messages reached the root after it stopped (a serve retry timer outlived it)", got)
		}

		root, err = SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{refuser}, Drain: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		stopWatch2, letters2 := deadLetters(n.e, root.PID())
		defer stopWatch2()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := root.Handover(ctx); err == nil || root.Phase() != PhaseDrain {
			t.Fatalf("Handover = %v in phase %s, want it cut short in the drain", err, root.Phase())
		}
		closeRoot(t, root)
		time.Sleep(2 * time.Hour)
		if got := letters2(); got != 0 {
			t.Fatalf("%d messages reached the root after it stopped (the drain deadline outlived it)", got)
		}
		<-n.e.Poison(refuser).Done()
	})
}

// TestRootSurvivesAKillInEveryPhase: the root killed in each phase of the handover
// (restarted in place by Recover) carries the cascade on from the state its spawner
// keeps: the same order, the lease released, nobody waits for a deadline.
func TestRootSurvivesAKillInEveryPhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		n := startNode(t, slowDelete{Store: store, d: 50 * time.Millisecond}, leasetest.Holder("a", ""))
		var j journal
		jobs, err := NewJobsHost([]Job{{Name: "tick", Schedule: Every(50 * time.Millisecond), Run: func(ctx context.Context) error {
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
			return nil
		}}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeJobs(t, jobs) })
		jobsPID := n.e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		p := memberStoppingIn(n.e, "primary", &j, store, 100*time.Millisecond, 50*time.Millisecond)
		sessions := func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
				return nil
			}
		}
		var phases []Phase
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Jobs: jobsPID, Members: []*actor.PID{p},
			Drain: time.Minute, Sessions: sessions, OnPhase: func(p Phase, _ time.Duration) { phases = append(phases, p) }})
		if err != nil {
			t.Fatal(err)
		}
		if err := root.WaitServing(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(70 * time.Millisecond) // a job runs
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- root.Handover(context.Background()) }()
		killed := map[Phase]bool{}
		for {
			synctest.Wait()
			ph := root.Phase()
			if ph == PhaseDone {
				break
			}
			if ph != PhaseRelaying && !killed[ph] {
				killed[ph] = true
				n.e.Send(root.PID(), Kill{Reason: "test"})
				continue
			}
			time.Sleep(time.Millisecond)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took >= time.Minute {
			t.Fatalf("handover took %s: it waited for a deadline", took)
		}
		want := []Phase{PhaseJobs, PhaseRelease, PhaseDrain, PhaseSessions, PhaseStop, PhaseDrained}
		if fmt.Sprint(phases) != fmt.Sprint(want) || len(killed) != len(want) {
			t.Fatalf("phases %v, killed in %v; want %v, killed in each", phases, killed, want)
		}
		if r := read(t, store); !r.Free() {
			t.Fatalf("lease after handover: %v", r)
		}
		got := j.all()
		if fmt.Sprint(got) != fmt.Sprint([]string{"primary serve", "primary stop-accepting (lease free: true)", "primary stop"}) {
			t.Fatalf("the member was told %v", got)
		}
		<-n.e.Poison(jobsPID).Done()
		<-n.e.Poison(p).Done()
		closeRoot(t, root)
	})
}
