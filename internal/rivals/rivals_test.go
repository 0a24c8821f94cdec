package rivals

import (
	"testing"
	"time"
)

// TestYieldTo: of two engines that see each other serve, the greater instance id stops
// once the rival has answered for a pace, and the other only after the grace.
func TestYieldTo(t *testing.T) {
	t0 := time.Unix(0, 0)
	for _, c := range []struct {
		me, rival string
		after     time.Duration
		want      bool
	}{
		{"b", "a", 0, false},
		{"b", "a", time.Second, true},
		{"a", "b", 0, false},
		{"a", "b", 2 * time.Second, false},
		{"a", "b", 3 * time.Second, true},
	} {
		if got := yieldTo(c.me, c.rival, t0, t0.Add(c.after), time.Second, 3*time.Second); got != c.want {
			t.Errorf("yieldTo(%s, %s, after %s) = %v, want %v", c.me, c.rival, c.after, got, c.want)
		}
	}
}
