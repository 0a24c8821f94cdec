package chaos

import (
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
)

// A repeating scenario is judged one cycle at a time (check.Cycle): each loop of its
// fault schedule is a cycle, begun by cycles, and the checks of a cycle see only that
// cycle's calls and events.

// cycles reports whether the scenario should run another fault cycle: the fixed CI
// count when no duration was asked for, else until the duration has passed (and at
// least one cycle). When it says yes, cycle done+1 begins now. Call it once per cycle,
// at the top of the scenario's loop: whatever prepares a cycle (a new standby) belongs
// inside the loop, so that it belongs to its cycle.
func (h *harness) cycles(done, ciCount int) bool {
	if h.ctx.Err() != nil {
		return false
	}
	more := done < ciCount
	if h.opts.Duration > 0 {
		more = done == 0 || time.Since(h.start) < h.opts.Duration
	}
	if !more {
		return false
	}
	h.mu.Lock()
	begins := len(h.cycleStarts) == done
	if begins {
		h.cycleStarts = append(h.cycleStarts, time.Now())
	}
	h.mu.Unlock()
	if begins {
		h.logf("cycle %d begins", done+1)
	}
	return true
}

// cycleList are the cycles so far, as the checks judge them: the first owns what came
// before it and the last what came after it.
func (h *harness) cycleList() check.Cycles {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(check.Cycles, len(h.cycleStarts))
	for i, at := range h.cycleStarts {
		out[i].N = i + 1
		if i > 0 {
			out[i].From = at
			out[i-1].To = at
		}
	}
	return out
}

// reportCycles are the cycles as the report shows them: from their real start to the
// next one's, the last to end.
func (h *harness) reportCycles(end time.Time) []check.Cycle {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]check.Cycle, len(h.cycleStarts))
	for i, at := range h.cycleStarts {
		out[i] = check.Cycle{N: i + 1, From: at, To: end}
		if i > 0 {
			out[i-1].To = at
		}
	}
	return out
}

// current is the cycle running now (N 0 before the first).
func (h *harness) current() check.Cycle {
	h.mu.Lock()
	defer h.mu.Unlock()
	return check.Cycle{N: len(h.cycleStarts)}
}

// checkNow records results the scenario judged during the current cycle, as that
// cycle's.
func (h *harness) checkNow(rs ...check.Result) {
	c := h.current()
	for _, r := range rs {
		if c.N > 0 {
			r = c.Label(r)
		}
		h.check(r)
	}
}

// perCycle judges every cycle's calls (those invoked within it) with judge.
func (h *harness) perCycle(hist []bench.Op, judge func(check.Cycle, []bench.Op) check.Result) {
	h.check(h.cycleList().Each(hist, judge)...)
}

// bounded closes each fault's takeover window at the end of the fault's cycle.
func (h *harness) bounded(faults []check.Fault) []check.Fault {
	cs := h.cycleList()
	out := make([]check.Fault, len(faults))
	for i, f := range faults {
		f.Until = cs.Of(f.Start).To
		out[i] = f
	}
	return out
}

// waitAnswering waits until m has answered a call. The calls in flight at a SIGKILL
// wait out their timeout, and with every worker waiting no call reaches the
// replacement: a cycle that ended before the traffic resumed would leave the next
// kill with nothing to judge, every other cycle of a soak.
func (h *harness) waitAnswering(m member) error {
	within := trafficConfig(h.opts).Timeout + 2*h.lease
	return h.waitFor(within, m.name()+" answering calls", func() bool {
		id := m.id()
		return id != "" && h.rec.Summary().Instances[id] > 0
	})
}
