package chaos

import (
	"errors"
	"testing"
)

// TestOnlyAccessTimeWaitsForNATSServersTickerAlone: the leak check waits out nats-server's
// access-time goroutine (kept by a batch store its timer closes) only when it is the one
// goroutine left; any other leftover is reported at once.
func TestOnlyAccessTimeWaitsForNATSServersTickerAlone(t *testing.T) {
	ats := "[Goroutine 4931 in state select, with github.com/nats-io/nats-server/v2/server/ats.Register.func1 on top of the stack:\ngithub.com/nats-io/nats-server/v2/server/ats.Register.func1(0x369c9df958f0)\n]"
	ours := "[Goroutine 77 in state chan receive, with github.com/abi-engine/engine/actors.(*Group).Go.func1 on top of the stack:\n]"
	for _, tc := range []struct {
		err  string
		want bool
	}{
		{"found unexpected goroutines:\n" + ats, true},
		{"found unexpected goroutines:\n" + ats + "\n\n" + ats, true},
		{"found unexpected goroutines:\n" + ats + "\n\n" + ours, false},
		{"found unexpected goroutines:\n" + ours, false},
		{"goleak: something else went wrong", false},
	} {
		if got := onlyAccessTime(errors.New(tc.err)); got != tc.want {
			t.Errorf("onlyAccessTime(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
