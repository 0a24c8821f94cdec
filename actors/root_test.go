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
			c.Send(from, Down{From: c.PID()})
		}
	}, name)
}

func TestHandoverCascadeOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := lease.NewMemStore()
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
		jobsPID := n.e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		p1 := member(n.e, "primary", &j, store, 50*time.Millisecond)
		p2 := member(n.e, "transfers", &j, store, 200*time.Millisecond)
		var phases []string
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Jobs: jobsPID, Members: []*actor.PID{p1, p2},
			Drain: time.Second, OnPhase: func(p string, d time.Duration) { phases = append(phases, p) }})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		<-ran // a job ran while serving
		if !jobs.Running() {
			t.Fatal("jobs not running while serving")
		}
		start := time.Now()
		if err := root.Handover(context.Background(), n.e); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if jobs.Running() {
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
		if fmt.Sprint(phases) != fmt.Sprint([]string{PhaseJobs, PhaseRelease, PhaseDrain, PhaseSessions, PhaseStop}) {
			t.Fatalf("phases %v", phases)
		}
		if root.Err() != nil {
			t.Fatalf("Err after a handover = %v", root.Err())
		}
		<-n.e.Poison(jobsPID).Done()
		<-n.e.Poison(p1).Done()
		<-n.e.Poison(p2).Done()
		<-n.e.Poison(root.PID()).Done()
		root.Stop()
	})
}

func TestDrainDeadlineStopsWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := lease.NewMemStore()
		n := startNode(t, store, leasetest.Holder("a", ""))
		var j journal
		stuck := member(n.e, "stuck", &j, store, time.Hour)
		root, err := SpawnRoot(n.e, RootConfig{Ownership: n.o, Members: []*actor.PID{stuck}, Drain: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		n.waitState(lease.StateServing, time.Second)
		start := time.Now()
		if err := root.Handover(context.Background(), n.e); err != nil {
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
		mem := lease.NewMemStore()
		flaky := leasetest.NewFlaky(mem)
		n := startNode(t, flaky, leasetest.Holder("a", ""))
		var j journal
		jobs, _ := NewJobsHost([]Job{{Name: "j", Schedule: Every(time.Hour), Run: func(context.Context) error { return nil }}}, nil, nil)
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
		if jobs.Running() {
			t.Fatal("jobs run on a fenced engine")
		}
		flaky.Fail(false)
		n.waitState(lease.StateServing, time.Second)
		synctest.Wait()
		if !jobs.Running() {
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
		if jobs.Running() {
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
		store := lease.NewMemStore()
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
		mem := lease.NewMemStore()
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
