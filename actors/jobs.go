package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	Run func(ctx context.Context) error
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
// cancels them at once. Its runners live here, not in the actor, so a restarted actor
// keeps them.
type JobsHost struct {
	jobs     []Job
	log      *zap.Logger
	onResult func(job string, d time.Duration, err error)

	mu      sync.Mutex
	current *generation    // the schedules running now, nil when halted
	all     sync.WaitGroup // every runner and halter of every generation
}

// generation is one serving period's runners: a fence followed by a restore starts a
// new one while the old one may still be finishing.
type generation struct {
	sched  context.CancelFunc // ends the schedules: no new runs
	cancel context.CancelFunc // ends the runs in progress
	wg     sync.WaitGroup
}

// NewJobsHost validates jobs. onResult (optional) sees every run's outcome.
func NewJobsHost(jobs []Job, log *zap.Logger, onResult func(job string, d time.Duration, err error)) (*JobsHost, error) {
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
	return &JobsHost{jobs: jobs, log: log.Named("jobs"), onResult: onResult}, nil
}

// Running reports whether the schedules run.
func (h *JobsHost) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.current != nil
}

// Producer is the actor's producer.
func (h *JobsHost) Producer() actor.Producer {
	return func() actor.Receiver { return &jobsActor{h: h} }
}

func (h *JobsHost) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current != nil {
		return
	}
	g := &generation{}
	sctx, sched := context.WithCancel(context.Background())
	rctx, cancel := context.WithCancel(context.Background())
	g.sched, g.cancel = sched, cancel
	h.current = g
	for _, j := range h.jobs {
		g.wg.Add(1)
		h.all.Add(1)
		go func() {
			defer h.all.Done()
			defer g.wg.Done()
			h.loop(sctx, rctx, j)
		}()
	}
}

func (h *JobsHost) loop(sched, runs context.Context, j Job) {
	next := j.Schedule.Next(time.Now())
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-sched.Done():
			t.Stop()
			return
		case <-t.C:
		}
		start := time.Now()
		err := runJob(runs, j)
		if h.onResult != nil {
			h.onResult(j.Name, time.Since(start), err)
		}
		if err != nil {
			h.log.Warn("job failed", zap.String("job", j.Name), zap.Error(err))
		}
		next = j.Schedule.Next(time.Now())
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

// halt stops the schedules; runs in progress get until deadline (zero: cancelled now).
// done is called once every runner of the generation has returned.
func (h *JobsHost) halt(deadline time.Time, done func()) {
	h.mu.Lock()
	g := h.current
	h.current = nil
	h.mu.Unlock()
	if g == nil {
		done()
		return
	}
	g.sched()
	var timer *time.Timer
	if deadline.IsZero() {
		g.cancel()
	} else {
		timer = time.AfterFunc(time.Until(deadline), g.cancel)
	}
	h.all.Add(1)
	go func() {
		defer h.all.Done()
		g.wg.Wait()
		if timer != nil {
			timer.Stop()
		}
		g.cancel()
		done()
	}()
}

type jobsActor struct{ h *JobsHost }

func (a *jobsActor) Receive(c *actor.Context) {
	from := c.Sender()
	reply := func(msg any) {
		if from != nil {
			c.Send(from, msg)
		}
	}
	switch m := c.Message().(type) {
	case Serve:
		a.h.start()
		reply(Accepting{From: c.PID(), On: true})
	case StopAccepting:
		e, self := c.Engine(), c.PID()
		a.h.halt(m.Deadline, func() {
			if from != nil {
				e.Send(from, Drained{From: self})
			}
		})
		reply(Accepting{From: c.PID(), On: false})
	case Stop:
		e, self := c.Engine(), c.PID()
		a.h.halt(time.Time{}, func() {
			if from != nil {
				e.Send(from, Down{From: self})
			}
		})
	case actor.Stopped:
		a.h.halt(time.Time{}, func() {})
		a.h.all.Wait()
	}
}

// Restart implements Restarter: the runners live in the host and go on.
func (a *jobsActor) Restart(*actor.Context) {}
