package node

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// This file is the engine's one lifecycle and its one way to end. Every end — Shutdown
// (a signal), abi-engine step-down, a Load that failed, and an end on its own (a lost
// lease, a standby whose claim ended, a rival) — asks beginEnd, which starts one
// ending; every later ask joins it. The ending runs the end's cascade (the handover,
// for Shutdown and step-down; the root ran its own for a lost lease; none for a failed
// Load), then the one close (teardown), then closes Done.

// stage is where the engine stands in its lifecycle; it only moves forward.
type stage int

const (
	stageNew     stage = iota // New returned; nothing started
	stageLoading              // Load runs
	stageUp                   // Load returned nil
	stageEnding               // an end began: its cascade, then the teardown
	stageEnded                // everything is stopped; Done is closed
)

var stageNames = [...]string{"new", "loading", "up", "ending", "ended"}

func (s stage) String() string {
	if s >= 0 && int(s) < len(stageNames) {
		return stageNames[s]
	}
	return "stage(?)"
}

// endKind is why the engine ends, which decides its cascade.
type endKind int

const (
	endShutdown   endKind = iota + 1 // Shutdown: the handover cascade
	endStepDown                      // abi-engine step-down: the handover cascade
	endOnItsOwn                      // the root ended it (its cascade ran), or a rival
	endFailedLoad                    // Load failed: nothing to hand over
)

// ending is the one end of an engine. Its fields are set by beginEnd before the
// ending's goroutine starts, except handoverErr, which that goroutine sets before it
// closes Done.
type ending struct {
	kind   endKind
	err    error              // Err: why the engine ended on its own, nil otherwise
	up     bool               // Load had returned when the end began
	cancel context.CancelFunc // cuts the cascade short: a Shutdown whose ctx ended

	handoverErr error // the handover's error, when it was cut short
}

// handsOver reports whether the end runs the handover cascade.
func (k endKind) handsOver() bool { return k == endShutdown || k == endStepDown }

// endCounts counts what the end stopped and released, so a test can show that nothing
// is stopped or released twice, whichever way the engine ended.
type endCounts struct {
	endings      atomic.Int32 // endings run (beginEnd that started one)
	memberStops  atomic.Int32 // Stop told to the members: by the root's cascade, or by the teardown
	releases     atomic.Int32 // Release asked of the ownership: by the handover, or by the teardown
	membersClose atomic.Int32 // closeMembers runs
}

// beginEnd starts the engine's end, or joins the one that began first, and returns it
// and whether this call started it; nil for an engine never loaded (its stage is then
// ended: Load refuses it).
func (e *Engine) beginEnd(kind endKind, err error) (end *ending, started bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.stage {
	case stageNew:
		e.stage = stageEnded
		return nil, false
	case stageEnding, stageEnded:
		return e.end, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	end = &ending{kind: kind, err: err, up: e.stage == stageUp, cancel: cancel}
	e.end, e.stage = end, stageEnding
	e.counts.endings.Add(1)
	e.ending.Add(1)
	go func() {
		defer e.ending.Done()
		e.runEnd(ctx, end)
	}()
	return end, true
}

// runEnd is the ending's goroutine: the cascade, the watchers stopped, the teardown,
// and Done closed last. The engine owns it; waitEnd waits for it.
func (e *Engine) runEnd(ctx context.Context, end *ending) {
	defer end.cancel()
	e.mu.Lock()
	root := e.root
	e.mu.Unlock()
	if end.kind.handsOver() && root != nil {
		start := time.Now()
		if err := root.Handover(ctx); err != nil {
			e.log.Warn("handover cut short", zap.Error(err))
			end.handoverErr = err
		}
		e.log.Debug("handover done", zap.Duration("took", time.Since(start))) // the root logged its phase done
	}
	e.stopWatchers()
	e.teardown()
	e.mu.Lock()
	e.stage, e.endErr = stageEnded, end.err
	e.mu.Unlock()
	close(e.done)
}

// waitEnd waits until end is over, or ctx ends: then it cuts end's cascade short and
// waits for the rest, which each part bounds itself. It returns the handover's error
// when it was cut short; else, to a caller that joined an end under way (started
// false), its ctx's error if it ended first, as a wait for someone else's end.
func (e *Engine) waitEnd(ctx context.Context, end *ending, started bool) error {
	var cut error
	select {
	case <-e.done:
	case <-ctx.Done():
		cut = ctx.Err()
		end.cancel()
		<-e.done
	}
	e.ending.Wait()
	switch {
	case end.handoverErr != nil && (started || cut != nil):
		return end.handoverErr
	case !started:
		return cut
	}
	return nil
}

// upLocked reports, under e.mu, whether Load has returned nil: an end that began after
// it keeps the engine's state readable until the teardown.
func (e *Engine) upLocked() bool {
	return e.stage == stageUp || e.end != nil && e.end.up
}
