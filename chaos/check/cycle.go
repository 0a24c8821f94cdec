package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/abi-engine/engine/bench"
)

// Cycle is one repetition of a scenario's fault cycle, from the moment the scenario
// began it to the moment it began the next. A scenario ends a cycle only once the
// cycle's faults are over and the engines settled (the successor serves, the old
// holder exited), and starts the next one with a pause before its fault, so a boundary
// falls where nothing is going on.
//
// A call belongs to the cycle it was invoked in. A window a cycle's check judges
// (answered-only-by from the resume on, a fault's takeover window) ends at the end of
// the cycle: what the next cycle's faults do is that cycle's business.
type Cycle struct {
	// N counts the cycles from 1.
	N int `json:"n"`
	// From is when the cycle began; zero for the first, which also owns what came
	// before it (the setup, the traffic's first calls).
	From time.Time `json:"from"`
	// To is when the next cycle began; zero for the last, which also owns what came
	// after it.
	To time.Time `json:"to"`
}

// String names the cycle as violations do.
func (c Cycle) String() string { return fmt.Sprintf("cycle %d", c.N) }

// Contains reports whether t falls within the cycle.
func (c Cycle) Contains(t time.Time) bool {
	return (c.From.IsZero() || !t.Before(c.From)) && (c.To.IsZero() || t.Before(c.To))
}

// Ended reports whether the cycle had ended by t: a call completed then ran into the
// next cycle.
func (c Cycle) Ended(t time.Time) bool { return !c.To.IsZero() && !t.Before(c.To) }

// Calls are the calls that belong to the cycle: those invoked within it.
func (c Cycle) Calls(h []bench.Op) []bench.Op {
	var out []bench.Op
	for _, op := range h {
		if c.Contains(op.Invoke) {
			out = append(out, op)
		}
	}
	return out
}

// Revisions are the lease revisions observed before the cycle ended: those within it,
// and the earlier ones that say who held the lease when it began.
func (c Cycle) Revisions(events []LeaseEvent) []LeaseEvent {
	var out []LeaseEvent
	for _, e := range events {
		if c.Ended(e.At) {
			break
		}
		out = append(out, e)
	}
	return out
}

// Label marks r as this cycle's verdict: its summary and every violation name the
// cycle, and Merge folds it together with the other cycles' verdicts of the check.
func (c Cycle) Label(r Result) Result {
	r.Cycle = c.N
	r.Summary = c.String() + ": " + r.Summary
	details := make([]string, len(r.Details))
	for i, d := range r.Details {
		details[i] = c.String() + ": " + d
	}
	if len(details) > 0 {
		r.Details = details
	}
	return r
}

// Cycles are a run's cycles in order.
type Cycles []Cycle

// Of is the cycle t falls in: the first for anything before it, the last for
// anything after it. It is the zero Cycle when there are none.
func (cs Cycles) Of(t time.Time) Cycle {
	for _, c := range cs {
		if c.Contains(t) {
			return c
		}
	}
	if len(cs) > 0 && t.Before(cs[0].From) {
		return cs[0]
	}
	if len(cs) > 0 {
		return cs[len(cs)-1]
	}
	return Cycle{}
}

// Split sorts the calls by cycle in one pass: out[i] are the calls of cs[i], those
// invoked within it (the first also takes those before it, the last those after). The
// history of a long soak holds millions of calls and a thousand cycles, too many to
// scan once per cycle.
func (cs Cycles) Split(h []bench.Op) [][]bench.Op {
	out := make([][]bench.Op, len(cs))
	if len(cs) == 0 {
		return out
	}
	for _, op := range h {
		// The last cycle that began at or before the invocation.
		i := sort.Search(len(cs), func(i int) bool { return op.Invoke.Before(cs[i].From) }) - 1
		i = max(i, 0)
		out[i] = append(out[i], op)
	}
	return out
}

// Each judges every cycle's calls with judge and labels each verdict with its cycle.
// Every call is judged once, by the cycle it was invoked in; without cycles the whole
// history is judged as one.
func (cs Cycles) Each(h []bench.Op, judge func(Cycle, []bench.Op) Result) []Result {
	if len(cs) == 0 {
		return []Result{judge(Cycle{}, h)}
	}
	out := make([]Result, 0, len(cs))
	for i, calls := range cs.Split(h) {
		out = append(out, cs[i].Label(judge(cs[i], calls)))
	}
	return out
}

// maxCycleNumbers bounds the failed cycles a merged summary names.
const maxCycleNumbers = 10

// Merge folds the verdicts one check gave for each cycle (labelled by Cycle.Label)
// into one Result per check, where the first of them stood: it passes when every
// cycle passed, counts the violations of all, lists them (each naming its cycle) up to
// MaxViolations, and keeps every cycle's verdict in Cycles. Results that belong to no
// cycle pass through as they are, and so does a check judged in a single cycle.
func Merge(rs []Result) []Result {
	groups := map[string][]Result{}
	for _, r := range rs {
		if r.Cycle > 0 {
			groups[r.Name] = append(groups[r.Name], r)
		}
	}
	var out []Result
	done := map[string]bool{}
	for _, r := range rs {
		if r.Cycle == 0 {
			out = append(out, r)
			continue
		}
		if done[r.Name] {
			continue
		}
		done[r.Name] = true
		g := groups[r.Name]
		if len(g) == 1 {
			out = append(out, r)
			continue
		}
		out = append(out, merge(g))
	}
	return out
}

func merge(g []Result) Result {
	m := Result{Name: g[0].Name, Passed: true, Cycles: g}
	var failed []Result
	for _, r := range g {
		m.Count += r.Count
		if len(m.Details) < MaxViolations {
			m.Details = append(m.Details, r.Details[:min(len(r.Details), MaxViolations-len(m.Details))]...)
		}
		if !r.Passed {
			m.Passed = false
			failed = append(failed, r)
		}
	}
	distinct := map[int]bool{}
	for _, r := range g {
		distinct[r.Cycle] = true
	}
	if m.Passed {
		m.Summary = fmt.Sprintf("%d verdicts over %d cycles, all passed; %s", len(g), len(distinct), g[0].Summary)
		if len(g) == len(distinct) {
			m.Summary = fmt.Sprintf("all %d cycles passed; %s", len(g), g[0].Summary)
		}
		return m
	}
	var nums []string
	seen := map[int]bool{}
	for _, r := range failed {
		if !seen[r.Cycle] {
			seen[r.Cycle] = true
			nums = append(nums, fmt.Sprint(r.Cycle))
		}
	}
	list := "cycle " + strings.Join(nums[:min(len(nums), maxCycleNumbers)], ", ")
	if len(nums) > 1 {
		list = "cycles" + list[len("cycle"):]
	}
	if len(nums) > maxCycleNumbers {
		list += ", …"
	}
	m.Summary = fmt.Sprintf("%d of %d cycles failed (%s), %d violation(s); %s", len(nums), len(distinct), list, m.Count, failed[0].Summary)
	return m
}

// FailedCycles lists the numbers of the cycles in which a check failed, in order.
func FailedCycles(rs []Result) []int {
	set := map[int]bool{}
	for _, r := range rs {
		for _, c := range append([]Result{r}, r.Cycles...) {
			if c.Cycle > 0 && !c.Passed {
				set[c.Cycle] = true
			}
		}
	}
	out := make([]int, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
