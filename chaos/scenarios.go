package chaos

// The scenarios live in scenarios_process.go (engines as child processes) and
// scenarios_inproc.go (engines in this process); this file holds what they share.

import (
	"fmt"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
)

// Allowances the checkers judge with (docs/chaos.md explains each).
const (
	// observerTolerance is how much earlier or later the harness's watch may see a lease
	// revision than a contender does.
	observerTolerance = 50 * time.Millisecond
	// linearizabilityBudget bounds the porcupine search over all keys, plus a second
	// per 10,000 operations for long soaks.
	linearizabilityBudget = 60 * time.Second
	// processStart is what a replacement process adds to a takeover: exec, connect,
	// open the buckets.
	processStart = time.Second
)

// handoverOverlap is the designed overlap of a clean handover: the old engine releases
// the lease and then unsubscribes, so a successor quick enough may subscribe first.
// The release-to-unsubscribe step is one actor message and a flush; a lease/4 (the
// renewal interval) bounds it generously.
func (h *harness) handoverOverlap() time.Duration { return h.lease / 4 }

// historyChecks are the checks every scenario runs over its whole history.
func (h *harness) historyChecks(overlap time.Duration) {
	hist := h.history()
	budget := linearizabilityBudget + time.Duration(len(hist)/10000)*time.Second
	h.check(check.NoOverlap(hist, overlap))
	switch w := h.opts.Workload; {
	case w == nil:
		h.check(check.Linearizable(hist, budget))
	case w.Model() != nil:
		h.check(check.LinearizableModel(hist, *w.Model(), budget))
	}
	if jobs := h.jobRuns(); len(jobs) > 0 {
		// A handover stops the jobs before it releases the lease, and a fence stops
		// them at once: no overlap at all is allowed.
		r := check.NoOverlap(jobs, 0)
		r.Name = "jobs-no-overlap"
		r.Summary = fmt.Sprintf("%d probe job runs: %s", len(jobs), r.Summary)
		h.check(r)
	}
}

// exitCodes checks that every process ended as the scenario expects: want maps a
// process to its exit code, -1 for a process the scenario killed.
func (h *harness) exitCodes(want map[*procMember]int) {
	var bad []string
	n := 0
	for _, m := range h.allMembers() {
		p, ok := m.(*procMember)
		if !ok {
			continue
		}
		code, ok := want[p]
		if !ok {
			continue
		}
		n++
		if !p.p.Exited() || p.p.ExitCode() != code {
			bad = append(bad, fmt.Sprintf("%s: %s, want exit %d", p.nm, p.end(), code))
		}
	}
	r := check.Result{Name: "exit-codes", Passed: len(bad) == 0, Count: len(bad), Details: bad,
		Summary: fmt.Sprintf("%d process(es) ended as expected", n)}
	if len(bad) > 0 {
		r.Summary = fmt.Sprintf("%d of %d process(es) ended otherwise than expected", len(bad), n)
	}
	h.check(r)
}

// zeroFailures judges a cycle's calls by check.ZeroFailures.
func zeroFailures(_ check.Cycle, calls []bench.Op) check.Result { return check.ZeroFailures(calls) }

// answeredAfterTakeover judges every cycle's calls by check.AnsweredAfterTakeover, each
// fault's window closed at the end of its cycle.
func (h *harness) answeredAfterTakeover(faults []check.Fault, window time.Duration) {
	faults = h.bounded(faults)
	h.perCycle(h.history(), func(_ check.Cycle, calls []bench.Op) check.Result {
		return check.AnsweredAfterTakeover(calls, faults, window)
	})
}

// takeoversAfterSilence judges, for each fault at, the first takeover after it within
// its cycle by check.TakeoverAfterSilence.
func (h *harness) takeoversAfterSilence(at []time.Time) {
	cs, events := h.cycleList(), h.leaseEvents()
	for _, t := range at {
		c := cs.Of(t)
		h.check(c.Label(check.TakeoverAfterSilence(c.Revisions(events), t, h.lease, observerTolerance)))
	}
}

// holderKept checks that the lease did not change holder within [from, to].
func (h *harness) holderKept(name string, from, to time.Time) check.Result {
	holder := h.holderAt(from)
	var changes []string
	for _, e := range h.leaseEvents() {
		if e.At.Before(from) || e.At.After(to) {
			continue
		}
		if e.Holder != holder {
			changes = append(changes, fmt.Sprintf("at %s the lease went from %s to %s (revision %d)",
				e.At.Format("15:04:05.000"), h.describeHolder(holder), h.describeHolder(e.Holder), e.Revision))
			holder = e.Holder
		}
	}
	r := check.Result{Name: name, Passed: len(changes) == 0, Count: len(changes), Details: changes,
		Summary: fmt.Sprintf("%s kept the lease for %s", h.describeHolder(h.holderAt(from)), to.Sub(from).Round(time.Millisecond))}
	if len(changes) > 0 {
		r.Summary = fmt.Sprintf("the lease changed holder %d time(s)", len(changes))
	}
	return r
}
