// Package testwait is the one bounded wait of the project's tests. A test waits for an
// event where it has one (a channel, a published status); For is for what only polling
// can see, such as the state of a real server or of another process. Every wait has a
// bound and names what it waited for when it fails.
package testwait

import (
	"testing"
	"time"
)

// maxPoll caps the pause between two checks of a condition.
const maxPoll = 20 * time.Millisecond

// For checks cond until it holds, failing t if it does not within the bound. The pause
// between checks starts at a millisecond and doubles up to maxPoll, so a condition that
// holds soon is seen soon and a long wait costs little.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(pause) // polling what has no event to wait on, bounded above
		pause = min(2*pause, maxPoll)
	}
}

// Recv waits for one value from ch, failing t if none comes within the bound or ch is
// closed.
func Recv[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the channel was closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
	panic("unreachable")
}

// Closed waits until ch is closed (or sends), failing t after the bound.
func Closed[T any](t testing.TB, ch <-chan T, within time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("timed out after %s waiting until %s", within, what)
	}
}
