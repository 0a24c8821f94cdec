package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Why a run stopped (Report.StoppedBy).
const (
	StoppedByCount    = "count"
	StoppedByDuration = "duration"
	StoppedByStop     = "stop"
	StoppedByContext  = "context"
)

// loop decides, before every operation, whether a worker may issue another one.
type loop struct {
	ctx  context.Context
	stop <-chan struct{}
	end  time.Time     // zero: no Duration
	left *atomic.Int64 // nil: no Count
}

// next claims one operation.
func (l *loop) next() bool { return l.claim(1) == 1 }

// claim claims up to n operations and returns how many it got: n, fewer when Count
// runs out, 0 when the run is over.
func (l *loop) claim(n int64) int64 {
	if l.halted() {
		return 0
	}
	if l.left == nil {
		return n
	}
	return min(n, max(0, n+l.left.Add(-n)))
}

// halted reports whether a condition other than Count ends the run. Every condition is
// checked without blocking, so a worker never waits for anything but its own call.
func (l *loop) halted() bool {
	if l.ctx.Err() != nil {
		return true
	}
	select {
	case <-l.stop:
		return true
	default:
	}
	return !l.end.IsZero() && !time.Now().Before(l.end)
}

func (l *loop) stoppedBy() string {
	switch {
	case l.left != nil && l.left.Load() <= 0:
		return StoppedByCount
	case l.ctx.Err() != nil:
		return StoppedByContext
	case closed(l.stop):
		return StoppedByStop
	default:
		return StoppedByDuration
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// measure runs one worker function per worker until the loop stops them, with the
// progress line if asked for, and reports what the recorder holds afterwards (the
// caller adds the history once any cleanup is recorded too).
func measure(ctx context.Context, cfg Config, o *options, work func(id int, l *loop)) *Report {
	start := time.Now()
	l := &loop{ctx: ctx, stop: o.stop}
	if cfg.Duration > 0 {
		l.end = start.Add(cfg.Duration)
	}
	if cfg.Count > 0 {
		l.left = new(atomic.Int64)
		l.left.Store(cfg.Count)
	}
	var p *progressLine
	stopProgress := func() {}
	if o.progressW != nil {
		p = newProgressLine(o.progressW, start)
		ticks, stopTicker := o.ticks(o.progressEvery)
		stopProgress = p.run(o.recorder, ticks, stopTicker)
	}
	var wg sync.WaitGroup
	for id := range cfg.Concurrency {
		wg.Go(func() { work(id, l) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if p != nil {
		p.final(o.recorder, elapsed)
	}
	sum := o.recorder.Summary()
	var tput float64
	if elapsed > 0 {
		tput = float64(sum.Ops-sum.Errors-sum.Interrupted) / elapsed.Seconds()
	}
	return &Report{
		Config:     cfg,
		Start:      start.Round(0),
		Elapsed:    elapsed,
		StoppedBy:  l.stoppedBy(),
		Throughput: tput,
		Summary:    sum,
	}
}

// workerRand is worker id's random source: reproducible from the seed, distinct per
// worker.
func workerRand(seed int64, id int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), uint64(id)+1))
}

// progressLine writes the status line. Only its ticker goroutine writes while the run
// goes on, and final runs after that goroutine has ended, so it needs no lock.
type progressLine struct {
	w       io.Writer
	term    bool
	start   time.Time
	lastOps int64
	lastAt  time.Time
	width   int
}

func newProgressLine(w io.Writer, start time.Time) *progressLine {
	return &progressLine{w: w, term: isTerminal(w), start: start, lastAt: start}
}

// run writes a line on every tick until the returned function is called; that
// function stops the ticker and waits for the goroutine.
func (p *progressLine) run(rec *Recorder, ticks <-chan time.Time, stopTicker func()) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-ticks:
				p.tick(rec, time.Now())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		stopTicker()
	}
}

// tick writes the rate over the interval since the last line.
func (p *progressLine) tick(rec *Recorder, now time.Time) {
	ops, errs, mism, p99 := rec.progress()
	rate := 0.0
	if d := now.Sub(p.lastAt); d > 0 {
		rate = float64(ops-p.lastOps) / d.Seconds()
	}
	p.lastOps, p.lastAt = ops, now
	p.write(now.Sub(p.start), ops, rate, errs, mism, p99, false)
}

// final writes the rate over the whole run and ends the line.
func (p *progressLine) final(rec *Recorder, elapsed time.Duration) {
	ops, errs, mism, p99 := rec.progress()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(ops) / elapsed.Seconds()
	}
	p.write(elapsed, ops, rate, errs, mism, p99, true)
}

func (p *progressLine) write(elapsed time.Duration, ops int64, rate float64, errs, mism int64, p99 time.Duration, last bool) {
	line := fmt.Sprintf("%7.1fs  %d ops  %.0f ops/s  %d errors  p99 %s", elapsed.Seconds(), ops, rate, errs, fmtDuration(p99))
	if mism > 0 {
		line += fmt.Sprintf("  %d mismatches", mism)
	}
	if !p.term {
		fmt.Fprintln(p.w, line)
		return
	}
	// Pad over what is left of a longer previous line.
	pad := strings.Repeat(" ", max(0, p.width-len(line)))
	p.width = len(line)
	end := ""
	if last {
		end = "\n"
	}
	fmt.Fprint(p.w, "\r"+line+pad+end)
}

// isTerminal reports whether w is a character device, where a status line can be
// redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
