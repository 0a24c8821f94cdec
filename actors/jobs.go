package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
)

// Schedule decides when a job runs next.
type Schedule interface {
	// Next is the first run time after t.
	Next(t time.Time) time.Time
}

// Every runs a job at a fixed interval, the first time one interval after serving starts.
type Every time.Duration

// Next implements Schedule.
func (e Every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// Job is work an embedder registers; it runs only on the serving engine.
type Job struct {
	Name     string
	Schedule Schedule
	// Run does one run. Its ctx ends when the engine fences, loses the lease, or its
	// handover deadline passes.
	//
	// The engine cannot stop a run that ignores its ctx. A handover keeps the lease
	// until the run returns, so no other engine starts the job meanwhile; at a fence
	// (the lease may be taken over while the run goes on) only its writes can be
	// refused: ctx carries the epoch the run was started under (JobEpoch), which a
	// store that checks the epoch refuses once the next holder has advanced it.
	Run func(ctx context.Context) error
}

// jobEpochKey carries a run's epoch in its context.
type jobEpochKey struct{}

// JobEpoch is the epoch the engine served under when it started the run of ctx: the
// token the run's writes to a shared store carry, so that the store refuses them once
// another engine has taken the lease and advanced the epoch. ok is false outside a run.
func JobEpoch(ctx context.Context) (epoch uint64, ok bool) {
	v, ok := ctx.Value(jobEpochKey{}).(uint64)
	return v, ok
}

// Validate reports a job that cannot be scheduled.
func (j Job) Validate() error {
	switch {
	case j.Name == "":
		return errors.New("actors: a job needs a name")
	case j.Schedule == nil:
		return fmt.Errorf("actors: job %q needs a schedule", j.Name)
	case j.Run == nil:
		return fmt.Errorf("actors: job %q needs a function to run", j.Name)
	}
	if e, ok := j.Schedule.(Every); ok && e <= 0 {
		return fmt.Errorf("actors: job %q: interval %s must be positive", j.Name, time.Duration(e))
	}
	return nil
}

// JobsHost runs the engine's jobs while it serves. It obeys the role messages: Serve
// starts the schedules; StopAccepting lets the runs in progress finish (they finish
// against the engine still serving: itself) and cancels them at the deadline; Stop
// cancels every run at once. Drained and Down answer once the runs they ended have
// returned.
//
// The runners are goroutines the actor starts on Serve, one per job, which report their
// end by message. They and the role state live here, not in the actor, so a restarted
// actor keeps them; only the actor changes the role state. The actor waits for nothing:
// its owner waits for the runners with Close.
type JobsHost struct {
	jobs     []Job
	log      *zap.Logger
	onResult func(job string, d time.Duration, err error)
	clock    Clock // the schedules, the runs' durations and the drain deadline

	// life ends every run for good (Close); every generation's contexts derive from it.
	life    context.Context
	endLife context.CancelFunc
	runners *Group // every runner of every generation: Close waits for it

	// The role state, changed only from the actor.
	current *generation            // the schedules running now; nil when halted
	halting map[uint64]*generation // halted generations with a runner still running
	owed    []owedReply            // Drained and Down not sent yet
	lastID  uint64                 // the id of the latest generation
	// ended holds, per job, a channel closed once the latest runner of that job has
	// returned: a new generation's runner waits for it, so a restore after a fence
	// never starts a job beside its run that ignored the cancel.
	ended map[string]chan struct{}
}

// generation is one serving period's runners: a fence followed by a restore starts a
// new one while the old one may still be finishing.
type generation struct {
	id       uint64
	sched    context.CancelFunc // ends the schedules: no new runs
	cancel   context.CancelFunc // ends the runs in progress
	live     int                // runners that have not reported their end
	deadline time.Time          // when a halted generation's runs are cancelled
	epoch    atomic.Uint64      // the epoch its runs start under (Serve; written by the actor)
}

// owedReply is a Drained or a Down, sent once every generation up to upTo has ended.
type owedReply struct {
	to   *actor.PID
	msg  any
	upTo uint64
}

// Messages the jobs actor gets from its runners and its timers.
type (
	runnerEnded  struct{ gen uint64 }
	runsDeadline struct{ gen uint64 }
)

// JobsOption sets an optional part of a JobsHost.
type JobsOption func(*JobsHost)

// JobsClock runs the schedules, the runs' durations and the drain deadline on c
// instead of the real clock.
func JobsClock(c Clock) JobsOption { return func(h *JobsHost) { h.clock = c } }

// NewJobsHost validates jobs. onResult (optional) sees every run's outcome, timed on
// the host's clock.
func NewJobsHost(jobs []Job, log *zap.Logger, onResult func(job string, d time.Duration, err error), opts ...JobsOption) (*JobsHost, error) {
	seen := map[string]bool{}
	for _, j := range jobs {
		if err := j.Validate(); err != nil {
			return nil, err
		}
		if seen[j.Name] {
			return nil, fmt.Errorf("actors: two jobs are named %q", j.Name)
		}
		seen[j.Name] = true
	}
	if log == nil {
		log = zap.NewNop()
	}
	life, endLife := context.WithCancel(context.Background())
	h := &JobsHost{jobs: jobs, log: log.Named("jobs"), onResult: onResult, clock: clock.Real(),
		life: life, endLife: endLife, runners: NewGroup(), halting: map[uint64]*generation{}, ended: map[string]chan struct{}{}}
	for _, o := range opts {
		o(h)
	}
	if h.clock == nil {
		h.clock = clock.Real()
	}
	return h, nil
}

// Producer is the actor's producer.
func (h *JobsHost) Producer() actor.Producer {
	return func() actor.Receiver { return &jobsActor{h: h} }
}

// Close ends every run for good and waits until every runner has returned, or ctx
// ends. Call it once the actor has stopped (its spawner poisons it, and its Stopped
// cancels the runs): a stopped actor starts no runner.
func (h *JobsHost) Close(ctx context.Context) error {
	h.endLife()
	if err := h.runners.Wait(ctx); err != nil {
		return fmt.Errorf("actors: a job's run did not return when cancelled: %w", err)
	}
	return nil
}

func (h *JobsHost) loop(sched, runs context.Context, g *generation, j Job) {
	next := j.Schedule.Next(h.clock.Now())
	for {
		t := h.clock.NewTimer(next.Sub(h.clock.Now()))
		select {
		case <-sched.Done():
			t.Stop()
			return
		case <-t.C():
		}
		start := h.clock.Now()
		err := runJob(context.WithValue(runs, jobEpochKey{}, g.epoch.Load()), j)
		if h.onResult != nil {
			h.onResult(j.Name, h.clock.Now().Sub(start), err)
		}
		if err != nil {
			h.log.Warn("job failed", zap.String("job", j.Name), zap.Error(err))
		}
		next = j.Schedule.Next(h.clock.Now())
	}
}

// runJob runs one run, turning a panic into an error so one bad job does not end the
// schedules of the others.
func runJob(ctx context.Context, j Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("job %q panicked: %v", j.Name, r)
		}
	}()
	return j.Run(ctx)
}

// jobsActor is the jobs host's actor. Its timers (a halted generation's deadline) are
// its own: stopped when the generation ends, on Stopped and on a restart, which arms
// them again from the host.
type jobsActor struct {
	h      *JobsHost
	timers map[uint64]clock.Timer
}

func (a *jobsActor) Receive(c *actor.Context) {
	if cmd, ok := TakeRole(c.Message(), c.Sender()); ok {
		a.role(c, cmd)
		return
	}
	h := a.h
	switch m := c.Message().(type) {
	case runnerEnded:
		a.runnerEnded(c, m.gen)
	case runsDeadline:
		if g := h.halting[m.gen]; g != nil {
			g.cancel()
		}
	case actor.Stopped:
		a.stopTimers()
		if g := h.current; g != nil {
			g.sched()
			g.cancel()
		}
		for _, g := range h.halting {
			g.cancel()
		}
		// No wait here: Close waits for the runners.
	}
}

// role obeys a role command. The jobs host has no broker step: Serve and StopAccepting
// are answered at once; Drained and Down once the runs they ended have returned.
func (a *jobsActor) role(c *actor.Context, cmd *RoleCommand) {
	h := a.h
	switch m := cmd.Msg.(type) {
	case Serve:
		a.start(c, m.Epoch)
		cmd.Answer(c, c.PID(), nil)
	case StopAccepting:
		// No new runs; the runs in progress get until the deadline.
		a.halt(c, m.Deadline)
		a.owe(c, cmd.From, Drained{From: c.PID()})
		cmd.Answer(c, c.PID(), nil)
	case Stop, CloseRole:
		a.halt(c, time.Time{})
		for _, g := range h.halting {
			g.cancel()
		}
		a.owe(c, cmd.From, RoleReply(Stop{}, c.PID(), nil))
		cmd.From = nil // answered once the runs have returned
		cmd.Answer(c, c.PID(), nil)
	}
}

// Restart implements Restarter: the runners live in the host and go on; the deadline
// timers are armed again.
func (a *jobsActor) Restart(c *actor.Context) {
	a.stopTimers()
	for _, g := range a.h.halting {
		if !g.deadline.IsZero() {
			a.arm(c, g)
		}
	}
}

// start starts a generation: one runner per job. Each reports its end by message.
// Serving already, it only takes the new epoch for the runs it starts from now on.
func (a *jobsActor) start(c *actor.Context, epoch uint64) {
	h := a.h
	if h.current != nil {
		h.current.epoch.Store(epoch)
		return
	}
	if h.life.Err() != nil {
		return
	}
	h.lastID++
	g := &generation{id: h.lastID}
	sctx, sched := context.WithCancel(h.life)
	rctx, cancel := context.WithCancel(h.life)
	g.sched, g.cancel = sched, cancel
	g.epoch.Store(epoch)
	h.current = g
	e, self := c.Engine(), c.PID()
	for _, j := range h.jobs {
		prev, done := h.ended[j.Name], make(chan struct{})
		started := h.runners.Go(func() {
			defer close(done)
			if prev != nil {
				select {
				case <-prev: // the job's run of an earlier generation has returned
				case <-sctx.Done():
				}
			}
			h.loop(sctx, rctx, g, j)
			e.Send(self, runnerEnded{gen: g.id})
		})
		if started { // the group is never shut: always
			g.live++
			h.ended[j.Name] = done
		}
	}
}

// halt ends the current generation's schedules; its runs in progress are cancelled at
// deadline (zero: now).
func (a *jobsActor) halt(c *actor.Context, deadline time.Time) {
	h := a.h
	g := h.current
	if g == nil {
		return
	}
	h.current = nil
	g.sched()
	if g.live == 0 {
		g.cancel()
		return
	}
	h.halting[g.id] = g
	if deadline.IsZero() || !h.clock.Now().Before(deadline) {
		g.cancel()
		return
	}
	g.deadline = deadline
	a.arm(c, g)
}

func (a *jobsActor) arm(c *actor.Context, g *generation) {
	if a.timers == nil {
		a.timers = map[uint64]clock.Timer{}
	}
	if t := a.timers[g.id]; t != nil {
		t.Stop()
	}
	e, self, id, clk := c.Engine(), c.PID(), g.id, a.h.clock
	a.timers[g.id] = clk.AfterFunc(g.deadline.Sub(clk.Now()), func() { e.Send(self, runsDeadline{gen: id}) })
}

func (a *jobsActor) runnerEnded(c *actor.Context, id uint64) {
	h := a.h
	g := h.halting[id]
	if g == nil {
		if h.current != nil && h.current.id == id {
			h.current.live-- // ended with the host's life (Close)
		}
		return
	}
	if g.live--; g.live > 0 {
		return
	}
	delete(h.halting, id)
	g.cancel()
	if t := a.timers[id]; t != nil {
		t.Stop()
		delete(a.timers, id)
	}
	a.pay(c)
}

// owe records a reply due to `to` once every generation there is now has ended.
func (a *jobsActor) owe(c *actor.Context, to *actor.PID, msg any) {
	if to == nil {
		return
	}
	a.h.owed = append(a.h.owed, owedReply{to: to, msg: msg, upTo: a.h.lastID})
	a.pay(c)
}

// pay sends the replies whose generations have all ended.
func (a *jobsActor) pay(c *actor.Context) {
	h := a.h
	kept := h.owed[:0]
	for _, o := range h.owed {
		pending := false
		for id := range h.halting {
			if id <= o.upTo {
				pending = true
				break
			}
		}
		if pending {
			kept = append(kept, o)
			continue
		}
		c.Send(o.to, o.msg)
	}
	h.owed = kept
}

func (a *jobsActor) stopTimers() {
	for id, t := range a.timers {
		t.Stop()
		delete(a.timers, id)
	}
}
