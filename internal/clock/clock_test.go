package clock

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRateClockMapsToRealTime(t *testing.T) {
	base := time.Now()
	c := &rateClock{base: base, rate: 2}
	if got := c.Real(base.Add(2 * time.Second)); !got.Equal(base.Add(time.Second)) {
		t.Fatalf("2 s on a 2x clock is %s of real time, want 1 s", got.Sub(base))
	}
	if !c.Real(time.Time{}).IsZero() || !Real().Real(base).Equal(base) {
		t.Fatal("Real of the zero time or on the real clock moved it")
	}
	if d := RealDuration(c, time.Second); d != 500*time.Millisecond {
		t.Fatalf("a second on a 2x clock lasts %s, want 500ms", d)
	}
	if now := c.Now(); now.Before(base) || c.Real(now).After(time.Now()) {
		t.Fatalf("Now %v maps back to %v, after the real now", now, c.Real(now))
	}
}

func TestFakeFiresTimersInOrderAtTheirTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	var fired []time.Duration
	f.AfterFunc(3*time.Second, func() { fired = append(fired, 3*time.Second, f.Now().Sub(t0)) })
	f.AfterFunc(time.Second, func() { fired = append(fired, time.Second, f.Now().Sub(t0)) })
	timer := f.NewTimer(2 * time.Second)
	late := f.NewTimer(time.Minute)
	if n := f.Pending(); n != 4 {
		t.Fatalf("%d timers pending, want 4", n)
	}
	f.Advance(5 * time.Second)
	if want := []time.Duration{time.Second, 5 * time.Second, 3 * time.Second, 5 * time.Second}; !slices.Equal(fired, want) {
		t.Fatalf("the AfterFuncs (due, clock read) fired as %v, want %v: in due order, the clock reading the new time", fired, want)
	}
	select {
	case at := <-timer.C():
		if at.Sub(t0) != 2*time.Second {
			t.Fatalf("the timer's channel received %s, want its due time 2s", at.Sub(t0))
		}
	default:
		t.Fatal("the 2 s timer did not fire after 5 s")
	}
	if !f.Now().Equal(t0.Add(5*time.Second)) || f.Pending() != 1 {
		t.Fatalf("after the advance: now %s, %d pending; want 5s and 1", f.Now().Sub(t0), f.Pending())
	}
	if !late.Stop() || late.Stop() || f.Pending() != 0 {
		t.Fatal("Stop did not report the pending timer stopped once, or left it pending")
	}
	if timer.Stop() {
		t.Fatal("Stop of a fired timer reported it stopped")
	}
}

func TestFakeTickerDropsWhatASlowReaderMisses(t *testing.T) {
	f := NewFake(time.Time{})
	tk := f.NewTicker(time.Second)
	f.Advance(10 * time.Second)
	<-tk.C()
	select {
	case <-tk.C():
		t.Fatal("a ticker fired twice in one advance")
	default:
	}
	if f.Pending() != 1 {
		t.Fatalf("%d pending after a tick, want the ticker", f.Pending())
	}
	f.Advance(500 * time.Millisecond)
	select {
	case <-tk.C():
		t.Fatal("the ticker fired before its next period")
	default:
	}
	f.Advance(500 * time.Millisecond)
	<-tk.C()
	tk.Stop()
	if f.Pending() != 0 {
		t.Fatal("a stopped ticker is still pending")
	}
}

// TestFakeWaitPending: a test waits for the code under test to arm its timer, then
// moves the clock; WaitPending ends with the context, naming the count.
func TestFakeWaitPending(t *testing.T) {
	f := NewFake(time.Time{})
	armed := make(chan Timer)
	go func() { armed <- f.NewTimer(time.Second) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.WaitPending(ctx, 1); err != nil {
		t.Fatal(err)
	}
	timer := <-armed
	f.Advance(time.Second)
	<-timer.C()

	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := f.WaitPending(short, 1); err == nil || err.Error() != "clock: 0 timers pending, waited for 1: context canceled" {
		t.Fatalf("WaitPending with nothing armed and its context ended: %v", err)
	}
}
