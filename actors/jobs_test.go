package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/anthdm/hollywood/actor"
)

// caller sends role messages to a jobs host and records its replies.
type caller struct {
	pid     *actor.PID
	replies chan any
}

func newCaller(e *actor.Engine) *caller {
	c := &caller{replies: make(chan any, 16)}
	c.pid = e.SpawnFunc(func(ctx *actor.Context) {
		switch m := ctx.Message().(type) {
		case Accepting, Drained, Down:
			c.replies <- m
		}
	}, "caller")
	return c
}

func (c *caller) tell(e *actor.Engine, to *actor.PID, msg any) { e.SendWithSender(to, msg, c.pid) }

// next is the next reply, or nil when none comes while the bubble is blocked.
func (c *caller) next() any {
	synctest.Wait()
	select {
	case m := <-c.replies:
		return m
	default:
		return nil
	}
}

func newJobsEngine(t *testing.T) *actor.Engine {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestJobsActorStopsWithoutWaitingForRuns: the jobs actor's Stopped waits for nothing
// (a run that ignores its ctx does not hold the actor's goroutine); the owner waits
// for the runners through Close, bounded by its ctx.
func TestJobsActorStopsWithoutWaitingForRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newJobsEngine(t)
		running, release := make(chan struct{}), make(chan struct{})
		jobs, err := NewJobsHost([]Job{{Name: "stubborn", Schedule: Every(time.Second), Run: func(context.Context) error {
			close(running)
			<-release // ignores its ctx
			return nil
		}}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		pid := e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		e.Send(pid, Serve{})
		<-running
		stopped := e.Poison(pid)
		synctest.Wait()
		if stopped.Err() == nil {
			close(release)
			<-stopped.Done()
			t.Fatal("the jobs actor waited in Stopped for a run to return")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := jobs.Close(ctx); err == nil {
			t.Fatal("Close returned while a run had not returned")
		}
		close(release)
		closeJobs(t, jobs)
	})
}

// TestJobsStopCancelsRunsAStopAcceptingLetFinish: StopAccepting lets the runs in
// progress go on until its deadline and answers Drained once they returned; a Stop
// meanwhile cancels them at once and answers Down once they returned.
func TestJobsStopCancelsRunsAStopAcceptingLetFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newJobsEngine(t)
		started := make(chan struct{}, 1)
		jobs, err := NewJobsHost([]Job{{Name: "long", Schedule: Every(time.Second), Run: func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		pid := e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		c := newCaller(e)
		c.tell(e, pid, Serve{})
		if m, ok := c.next().(Accepting); !ok || !m.On {
			t.Fatalf("Serve answered %v, want Accepting{On: true}", m)
		}
		<-started
		c.tell(e, pid, StopAccepting{Deadline: time.Now().Add(time.Hour)})
		if m, ok := c.next().(Accepting); !ok || m.On {
			t.Fatalf("StopAccepting answered %v, want Accepting{On: false}", m)
		}
		if m := c.next(); m != nil {
			t.Fatalf("answered %v while a run goes on before its deadline", m)
		}
		start := time.Now()
		c.tell(e, pid, Stop{})
		got := map[string]bool{}
		for range 2 {
			switch c.next().(type) {
			case Drained:
				got["drained"] = true
			case Down:
				got["down"] = true
			}
		}
		if !got["drained"] || !got["down"] || time.Since(start) != 0 {
			t.Fatalf("after Stop: %v after %s; want Drained and Down at once (the run cancelled)", got, time.Since(start))
		}
		<-e.Poison(pid).Done()
		<-e.Poison(c.pid).Done()
		closeJobs(t, jobs)
	})
}

// TestJobsSurviveAKill: a killed jobs actor keeps its runners and its deadline: the
// runs go on and are cancelled at the StopAccepting deadline, answered by Drained.
func TestJobsSurviveAKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newJobsEngine(t)
		started := make(chan struct{}, 1)
		jobs, err := NewJobsHost([]Job{{Name: "long", Schedule: Every(time.Second), Run: func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		pid := e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		c := newCaller(e)
		c.tell(e, pid, Serve{})
		c.next()
		<-started
		deadline := time.Now().Add(time.Minute)
		c.tell(e, pid, StopAccepting{Deadline: deadline})
		c.next() // Accepting{false}
		e.Send(pid, Kill{Reason: "test"})
		synctest.Wait()
		time.Sleep(time.Until(deadline))
		if _, ok := c.next().(Drained); !ok || time.Now().Before(deadline) {
			t.Fatal("no Drained at the deadline after a kill")
		}
		<-e.Poison(pid).Done()
		<-e.Poison(c.pid).Done()
		closeJobs(t, jobs)
	})
}

// TestJobsRestoreWaitsForARunThatIgnoredItsCancel: a fence (Stop) cancels a run that
// ignores its ctx; a restore (Serve again) starts the job again only once that run
// has returned, never beside it, and each run's ctx carries the epoch it started under.
func TestJobsRestoreWaitsForARunThatIgnoredItsCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newJobsEngine(t)
		type run struct {
			epoch   uint64
			overlap bool
		}
		runs, release := make(chan run, 4), make(chan struct{})
		var running atomic.Int32
		jobs, err := NewJobsHost([]Job{{Name: "stubborn", Schedule: Every(time.Second), Run: func(ctx context.Context) error {
			n, _ := JobEpoch(ctx)
			runs <- run{epoch: n, overlap: running.Add(1) > 1}
			defer running.Add(-1)
			if n == 1 {
				<-release // the first run ignores its ctx
			}
			return nil
		}}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		pid := e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
		e.Send(pid, Serve{Epoch: 1})
		if r := <-runs; r.epoch != 1 {
			t.Fatalf("the first run's ctx carries epoch %d, want 1", r.epoch)
		}
		e.Send(pid, Stop{})          // the fence
		e.Send(pid, Serve{Epoch: 2}) // the restore
		time.Sleep(10 * time.Second) // the bubble's clock: ten intervals
		synctest.Wait()
		early := len(runs)
		close(release)
		if early != 0 {
			t.Errorf("the job ran again (%+v) while its run cancelled at the fence had not returned", <-runs)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if r := <-runs; early == 0 && (r.overlap || r.epoch != 2) {
			t.Errorf("the run after the restore: %+v; want epoch 2 and no other run beside it", r)
		}
		<-e.Poison(pid).Done()
		closeJobs(t, jobs)
	})
}

// TestJobsRunOnTheirClock: the schedule and the drain deadline run on the host's clock.
// On a fake clock the job runs only once the clock has moved a whole interval, and a
// StopAccepting's deadline cancels the run only once the clock reaches it; the test
// waits for each timer to be armed (WaitPending) before it moves the clock.
func TestJobsRunOnTheirClock(t *testing.T) {
	const every, bound = time.Minute, 10 * time.Second
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	armed := func(n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := clk.WaitPending(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	e := newJobsEngine(t)
	runs, ended := make(chan time.Time, 4), make(chan error, 4)
	var n atomic.Int32
	jobs, err := NewJobsHost([]Job{{Name: "minutely", Schedule: Every(every), Run: func(ctx context.Context) error {
		runs <- clk.Now()
		if n.Add(1) > 1 { // the second run waits for its cancel
			<-ctx.Done()
			ended <- ctx.Err()
		}
		return nil
	}}}, nil, nil, JobsClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	c := &caller{replies: make(chan any, 16)}
	c.pid = e.SpawnFunc(func(ctx *actor.Context) {
		switch m := ctx.Message().(type) {
		case Accepting, Drained, Down:
			c.replies <- m
		}
	}, "caller")
	pid := e.Spawn(jobs.Producer(), "jobs", SpawnOpts("1")...)
	c.tell(e, pid, Serve{Epoch: 1})
	armed(1) // the runner's timer
	clk.Advance(every - time.Second)
	if len(runs) != 0 {
		t.Fatal("the job ran before the clock had moved one interval")
	}
	clk.Advance(time.Second)
	if at := testwait.Recv(t, runs, bound, "the first run"); !at.Equal(start.Add(every)) {
		t.Fatalf("the first run started at %s on the clock, want one interval after Serve", at.Sub(start))
	}
	armed(1) // the runner's timer for the next run
	clk.Advance(every)
	testwait.Recv(t, runs, bound, "the second run")

	c.tell(e, pid, StopAccepting{Deadline: clk.Now().Add(time.Hour)})
	armed(1) // the deadline's timer
	clk.Advance(time.Hour - time.Second)
	select {
	case err := <-ended:
		t.Fatalf("the run ended (%v) before the clock reached its deadline", err)
	default:
	}
	clk.Advance(time.Second)
	if err := testwait.Recv(t, ended, bound, "the run's cancel at the deadline"); err == nil {
		t.Fatal("the run's ctx ended without an error")
	}
	for {
		if _, ok := testwait.Recv(t, c.replies, bound, "Drained after the deadline").(Drained); ok {
			break
		}
	}
	<-e.Poison(pid).Done()
	<-e.Poison(c.pid).Done()
	closeJobs(t, jobs)
}
