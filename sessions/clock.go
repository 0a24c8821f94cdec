package sessions

import "time"

// Clock is the time source of idle expiry. Hosts take it injected so tests move time
// by hand; SystemClock is the real one.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker is the part of time.Ticker a host uses.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// SystemClock returns the clock of the time package.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTicker(d time.Duration) Ticker { return systemTicker{time.NewTicker(d)} }

type systemTicker struct{ t *time.Ticker }

func (t systemTicker) C() <-chan time.Time { return t.t.C }
func (t systemTicker) Stop()               { t.t.Stop() }
