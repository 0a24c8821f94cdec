package clock

import "time"

// Rate is a clock that runs rate times as fast as the real one (rate > 0), from now
// on. Its timers are real timers of the durations scaled back to the real time line.
func Rate(rate float64) Clock { return &rateClock{base: time.Now(), rate: rate} }

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

func (c *rateClock) real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.rate) }

func (c *rateClock) NewTimer(d time.Duration) Timer { return realClock{}.NewTimer(c.real(d)) }

func (c *rateClock) AfterFunc(d time.Duration, f func()) Timer {
	return realClock{}.AfterFunc(c.real(d), f)
}

func (c *rateClock) NewTicker(d time.Duration) Ticker { return realClock{}.NewTicker(c.real(d)) }
