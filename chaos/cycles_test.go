package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/protocol"
)

var c0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n int) time.Time { return c0.Add(time.Duration(n) * time.Millisecond) }

const (
	engA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	engB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	engC = "cccccccccccccccccccccccccccccccc"
)

// answered is a get invoked at from, answered by inst at to.
func answered(inst string, from, to time.Time) bench.Op {
	return bench.Op{Kind: protocol.OpGet, Key: "k", Instance: inst, Invoke: from, Complete: to}
}

// pauseHistory is two cycles of pause-holder as a correct engine plays them, shaped on
// `abi-engine chaos --scenario pause-holder --duration 90s --seed 4174`. Cycle 1
// (until 6 s): A is paused from 1 s to 3.5 s, B takes over at 1.8 s. Cycle 2: B is
// paused from 7 s to 9.5 s, C takes over at 7.85 s. Just before B's pause, eight
// calls reach B and wait out its pause: when it resumes it answers six UNAVAILABLE and
// the client resends two to C.
func pauseHistory() (hist []bench.Op, events []check.LeaseEvent, cycles check.Cycles, pcs []pauseCycle) {
	for t := 0; t < 12000; t += 10 {
		inv := ms(t)
		switch {
		case t < 1000:
			hist = append(hist, answered(engA, inv, inv.Add(time.Millisecond)))
		case t < 3500: // queued at the paused A, resent to B once A refuses them
			hist = append(hist, answered(engB, inv, ms(3505)))
		case t < 6990:
			hist = append(hist, answered(engB, inv, inv.Add(time.Millisecond)))
		case t < 7000:
		case t < 9500: // queued at the paused B, resent to C
			hist = append(hist, answered(engC, inv, ms(9505)))
		default:
			hist = append(hist, answered(engC, inv, inv.Add(time.Millisecond)))
		}
	}
	for w := range 8 {
		inv := ms(6999).Add(time.Duration(w) * time.Microsecond)
		if w < 6 {
			op := answered(engB, inv, ms(9502))
			op.Code, op.Err = protocol.Unavailable, "the engine stopped serving while the call ran"
			hist = append(hist, op)
		} else {
			hist = append(hist, answered(engC, inv, ms(9506)))
		}
	}
	rev := uint64(0)
	renew := func(holder string, from, to int) {
		for t := from; t < to; t += 250 {
			rev++
			events = append(events, check.LeaseEvent{At: ms(t), Revision: rev, Holder: holder})
		}
	}
	renew(engA, 0, 1000)     // last renewal at 750, before the pause at 1000
	renew(engB, 1800, 7000)  // last renewal at 6800, before the pause at 7000
	renew(engC, 7850, 12000) // takes over after more than a lease of silence
	cycles = check.Cycles{{N: 1, To: ms(6000)}, {N: 2, From: ms(6000)}}
	pcs = []pauseCycle{
		{stop: ms(1000), cont: ms(3500), paused: "engine-1", successor: engB},
		{stop: ms(7000), cont: ms(9500), paused: "engine-2", successor: engC},
	}
	return hist, events, cycles, pcs
}

// verdict finds the result of check name for cycle n.
func verdict(t *testing.T, rs []check.Result, name string, n int) check.Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name && r.Cycle == n {
			return r
		}
	}
	t.Fatalf("no %s verdict for cycle %d in %+v", name, n, rs)
	return check.Result{}
}

// TestPauseVerdictsJudgeOneCycleAtATime: the calls that the next cycle's pause holds up
// are that cycle's business, so a correct history passes; a zombie answer or a missing
// takeover fails and names its cycle.
func TestPauseVerdictsJudgeOneCycleAtATime(t *testing.T) {
	hist, events, cycles, pcs := pauseHistory()
	rs := pauseVerdicts(hist, events, cycles, pcs, time.Second)
	for _, r := range rs {
		if !r.Passed {
			t.Errorf("%s failed on a correct history: %s\n%s", r.Name, r.Summary, strings.Join(r.Details, "\n"))
		}
	}
	for n := 1; n <= 2; n++ {
		verdict(t, rs, "answered-only-by", n)
		verdict(t, rs, "takeover-after-silence", n)
	}

	// The paused A answers a call after it resumed: cycle 1 fails, and says so.
	zombie := append(hist[:len(hist):len(hist)], answered(engA, ms(3700), ms(3701)))
	r := verdict(t, pauseVerdicts(zombie, events, cycles, pcs, time.Second), "answered-only-by", 1)
	if r.Passed || !strings.HasPrefix(r.Details[0], "cycle 1: answered by another instance") {
		t.Fatalf("a zombie answer in cycle 1: %+v", r)
	}
	// The paused B answers in cycle 2.
	zombie = append(hist[:len(hist):len(hist)], answered(engB, ms(9700), ms(9701)))
	r = verdict(t, pauseVerdicts(zombie, events, cycles, pcs, time.Second), "answered-only-by", 2)
	if r.Passed || !strings.HasPrefix(r.Details[0], "cycle 2: answered by another instance than cccccccc") {
		t.Fatalf("a zombie answer in cycle 2: %+v", r)
	}

	// Nobody took over in cycle 1 (B only shows up in cycle 2): cycle 1's takeover check
	// must not borrow cycle 2's lease values.
	var late []check.LeaseEvent
	for _, e := range events {
		if e.Holder != engB || !e.At.Before(ms(6000)) {
			late = append(late, e)
		}
	}
	r = verdict(t, pauseVerdicts(hist, late, cycles, pcs, time.Second), "takeover-after-silence", 1)
	if r.Passed || !strings.HasPrefix(r.Details[0], "cycle 1: no other holder") {
		t.Fatalf("no takeover in cycle 1: %+v", r)
	}
}
