package lease

import (
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	g := NewGate()
	now := time.Now()
	if g.ValidAt(now) {
		t.Fatal("a new gate is open")
	}
	g.Allow(now.Add(fence))
	if !g.ValidAt(now) || !g.ValidAt(now.Add(fence-time.Nanosecond)) {
		t.Fatal("closed before its deadline")
	}
	if g.ValidAt(now.Add(fence)) {
		t.Fatal("open at its deadline")
	}
	g.Drain()
	if !g.ValidAt(now.Add(time.Hour)) {
		t.Fatal("a draining gate refused a call")
	}
	g.Close()
	if g.ValidAt(now) {
		t.Fatal("a closed gate allowed a call")
	}
}
