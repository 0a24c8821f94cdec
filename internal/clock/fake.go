package clock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/internal/notify"
)

// Fake is a clock moved by hand (Advance). It publishes how many of its timers and
// tickers are pending (armed, not fired, not stopped), so that a test waits for the
// code under test to arm its timer (WaitPending) before it moves the clock, instead of
// sleeping and hoping it has.
//
// Real is the identity: a Fake suits code whose every wait runs on the clock's timers.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer // pending, in no order
	// pending is len(timers), published for WaitPending.
	pending *notify.Value[int]
}

// fakeTimer is a timer, an AfterFunc or a ticker (every > 0) of a Fake.
type fakeTimer struct {
	clock *Fake
	due   time.Time
	every time.Duration // a ticker's period; 0 for a timer
	c     chan time.Time
	f     func()
}

var _ Clock = (*Fake)(nil)

// NewFake is a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start, pending: notify.New(0)} }

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Real implements Clock: a fake's time is the only time line there is.
func (f *Fake) Real(t time.Time) time.Time { return t }

// NewTimer implements Clock.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.arm(&fakeTimer{clock: f, c: make(chan time.Time, 1)}, d)
}

// AfterFunc implements Clock. f runs on the goroutine that calls Advance, once the
// clock's lock is released.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.arm(&fakeTimer{clock: f, f: fn}, d)
}

// NewTicker implements Clock.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic(fmt.Sprintf("clock: non-positive interval %s for a ticker", d))
	}
	return fakeTicker{f.arm(&fakeTimer{clock: f, every: d, c: make(chan time.Time, 1)}, d)}
}

func (f *Fake) arm(t *fakeTimer, d time.Duration) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.due = f.now.Add(d)
	f.timers = append(f.timers, t)
	f.pending.Store(len(f.timers))
	return t
}

// Pending is how many timers and tickers are armed and have neither fired nor been
// stopped.
func (f *Fake) Pending() int { return f.pending.Load() }

// WaitPending returns once at least n timers and tickers are pending, or an error
// naming how many are when ctx ends.
func (f *Fake) WaitPending(ctx context.Context, n int) error {
	got, err := f.pending.Wait(ctx, func(p int) bool { return p >= n })
	if err != nil {
		return fmt.Errorf("clock: %d timers pending, waited for %d: %w", got, n, err)
	}
	return nil
}

// Advance moves the clock on d, then fires every timer that came due, in the order of
// their due times: a timer's channel receives its due time, an AfterFunc runs. The
// clock reads the new time before anything fires, so what a timer wakes reads the time
// the test moved to, never a time in between. A ticker fires once at most per Advance
// (as a time.Ticker whose reader is slow drops ticks) and is armed again after the new
// time; a timer armed while they fire is due after it.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	end := f.now
	f.mu.Unlock()
	for {
		f.mu.Lock()
		t := f.nextDue(end)
		if t == nil {
			f.mu.Unlock()
			return
		}
		now := t.due
		if t.every > 0 {
			for !end.Before(t.due) {
				t.due = t.due.Add(t.every)
			}
		} else {
			f.remove(t)
		}
		f.mu.Unlock()
		switch {
		case t.f != nil:
			t.f()
		default:
			select {
			case t.c <- now:
			default:
			}
		}
	}
}

// nextDue is the pending timer due first, at end at the latest; f.mu is held.
func (f *Fake) nextDue(end time.Time) *fakeTimer {
	var first *fakeTimer
	for _, t := range f.timers {
		if !t.due.After(end) && (first == nil || t.due.Before(first.due)) {
			first = t
		}
	}
	return first
}

// remove unarms t, reporting whether it was pending; f.mu is held.
func (f *Fake) remove(t *fakeTimer) bool {
	for i, p := range f.timers {
		if p == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			f.pending.Store(len(f.timers))
			return true
		}
	}
	return false
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	return t.clock.remove(t)
}

type fakeTicker struct{ t *fakeTimer }

func (t fakeTicker) C() <-chan time.Time { return t.t.c }
func (t fakeTicker) Stop()               { t.t.Stop() }
