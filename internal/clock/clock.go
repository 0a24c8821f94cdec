// Package clock is the one time source the engine's timing logic is written against:
// the real clock, a clock running at a rate (the chaos harness's clock-rate fail point)
// and Fake, moved by hand in tests, which counts the timers armed on it so a test can
// wait until the code under test has armed its timer instead of sleeping.
package clock

import "time"

// Clock is a time line with its timers. Code that reads the time or waits for it takes
// a Clock, so that tests run it on a Fake and the chaos harness on a faster clock.
type Clock interface {
	Now() time.Time
	// Real is the real time at which the clock reads t (the zero time stays zero): what
	// a context deadline or a call's timeout, which run on the real time line, needs.
	Real(t time.Time) time.Time
	// NewTimer is a timer whose channel receives once the clock has moved on d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f once the clock has moved on d.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTicker is a ticker whose channel receives every d on the clock; like a
	// time.Ticker, it drops the ticks a slow reader misses.
	NewTicker(d time.Duration) Ticker
}

// Timer is the part of time.Timer the engine uses.
type Timer interface {
	// C receives the time the timer fired (nil for an AfterFunc timer).
	C() <-chan time.Time
	// Stop reports whether it stopped the timer before it fired.
	Stop() bool
}

// Ticker is the part of time.Ticker the engine uses.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the clock of the time package.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time             { return time.Now() }
func (realClock) Real(t time.Time) time.Time { return t }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// RealDuration is how long d on c lasts in real time.
func RealDuration(c Clock, d time.Duration) time.Duration {
	now := c.Now()
	return c.Real(now.Add(d)).Sub(c.Real(now))
}

// Until is how long from now, in real time, until c reads t.
func Until(c Clock, t time.Time) time.Duration { return time.Until(c.Real(t)) }
