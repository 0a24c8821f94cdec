package actors

import "time"

// Clock is the time the ownership tree runs on: the lease machine reads Now, and the
// timers, the gate and the calls' timeouts map its times back to the real time line
// with Real. OwnershipConfig.Clock nil is the real clock; the chaos harness gives an
// engine a faster one (fail point clock-rate) to show how much skew the lease bears
// (docs/chaos.md, clock-skew).
type Clock interface {
	Now() time.Time
	// Real is the real time at which the clock reads t.
	Real(t time.Time) time.Time
}

// realClock is the real time.
type realClock struct{}

func (realClock) Now() time.Time             { return time.Now() }
func (realClock) Real(t time.Time) time.Time { return t }

// RateClock is a clock that runs rate times as fast as the real one (rate > 0), from
// now on.
func RateClock(rate float64) Clock { return &rateClock{base: time.Now(), rate: rate} }

type rateClock struct {
	base time.Time // carries the monotonic reading every time derived from it keeps
	rate float64
}

func (c *rateClock) Now() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.base)) * c.rate))
}

func (c *rateClock) Real(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return c.base.Add(time.Duration(float64(t.Sub(c.base)) / c.rate))
}

// realDuration is how long d on c lasts in real time.
func realDuration(c Clock, d time.Duration) time.Duration {
	now := c.Now()
	return c.Real(now.Add(d)).Sub(c.Real(now))
}
