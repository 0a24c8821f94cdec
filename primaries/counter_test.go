package primaries

import (
	"context"
	"testing"
	"time"
)

// The call counter's hot path allocates nothing, even when the count falls to zero
// after every call (one call at a time); it used to make a channel each time.
func TestCounterFastPathAllocatesNothing(t *testing.T) {
	c := newCounter()
	if n := testing.AllocsPerRun(1000, func() { c.add(); c.done() }); n != 0 {
		t.Fatalf("add+done allocates %v times, want 0", n)
	}
}

// A waiter learns when the count reaches zero, whether it began waiting before or
// after the last call ended, and again on a later round.
func TestCounterWait(t *testing.T) {
	c := newCounter()
	if err := c.wait(t.Context()); err != nil {
		t.Fatalf("wait on an idle counter: %v", err)
	}
	for round := range 3 {
		c.add()
		c.add()
		waited := make(chan error, 1)
		go func() { waited <- c.wait(context.Background()) }()
		c.done()
		select {
		case err := <-waited:
			t.Fatalf("round %d: wait returned %v with a call still in flight", round, err)
		default:
		}
		c.done()
		if err := <-waited; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	c.add()
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if err := c.wait(ctx); err == nil {
		t.Fatal("wait returned nil with a call in flight")
	}
	c.done()
}
