package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/abi-engine/engine/bench"
)

// MaxViolations bounds the violations a Result lists; Violations counts them all.
const MaxViolations = 20

// Result is one checker's verdict.
type Result struct {
	// Name is the checker's name, e.g. "no-overlap".
	Name string `json:"name"`
	// Passed reports that the invariant held.
	Passed bool `json:"passed"`
	// Summary says in one line what was checked and what was found.
	Summary string `json:"summary"`
	// Count is the number of violations found; Details lists at most MaxViolations.
	Count   int      `json:"violations"`
	Details []string `json:"details,omitempty"`
	// Cycle is the cycle of a repeating scenario this verdict judged (Cycle.Label), 0
	// for a verdict over the whole run.
	Cycle int `json:"cycle,omitempty"`
	// Cycles are the verdicts of each cycle that Merge folded into this one.
	Cycles []Result `json:"cycles,omitempty"`
}

// violations collects a Result's evidence, keeping at most MaxViolations lines.
type violations struct {
	count   int
	details []string
}

func (v *violations) add(format string, args ...any) {
	v.count++
	if len(v.details) < MaxViolations {
		v.details = append(v.details, fmt.Sprintf(format, args...))
	}
}

func (v *violations) result(name, summary string) Result {
	return Result{Name: name, Passed: v.count == 0, Summary: summary, Count: v.count, Details: v.details}
}

// Fault is a fault the scenario injected, from when it began to when it ended (the
// same instant for a kill).
type Fault struct {
	Name       string    `json:"name"`
	Start, End time.Time `json:"-"`
	// Until is when the fault's cycle ended: its takeover window closes there, since
	// the scenario saw the takeover done before it ended the cycle. Zero: no bound.
	Until time.Time `json:"-"`
}

// stamp formats a time for evidence lines: wall clock with microseconds, enough to
// order the events of one run.
func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

// describe is one operation as evidence.
func describe(op bench.Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q (worker %d) invoked %s completed %s (%s)", op.Kind, op.Key, op.Worker,
		stamp(op.Invoke), stamp(op.Complete), op.Latency().Round(time.Microsecond))
	if op.Instance != "" {
		fmt.Fprintf(&b, " answered by %s", short(op.Instance))
	}
	if op.Failed() {
		fmt.Fprintf(&b, ": %s", op.Code)
		if op.Err != "" {
			fmt.Fprintf(&b, " %s", op.Err)
		}
	}
	return b.String()
}

// short abbreviates a 32-hex instance id to its first 8 digits, as the report does.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// measured are the operations a checker judges: not the seeding and cleanup around the
// run, and not the calls the run's own end cancelled.
func measured(h []bench.Op) []bench.Op {
	out := make([]bench.Op, 0, len(h))
	for _, op := range h {
		if !op.Setup && !op.Interrupted {
			out = append(out, op)
		}
	}
	return out
}

// ZeroFailures checks that every call succeeded: what a clean handover promises, since
// a call that reached nobody is resent by the client until the next engine answers.
func ZeroFailures(h []bench.Op) Result {
	ops := measured(h)
	var v violations
	byCode := map[string]int{}
	for _, op := range ops {
		if op.Failed() {
			byCode[string(op.Code)]++
			v.add("%s", describe(op))
		}
	}
	summary := fmt.Sprintf("%d calls, none failed", len(ops))
	if v.count > 0 {
		summary = fmt.Sprintf("%d of %d calls failed (%s)", v.count, len(ops), countsString(byCode))
	}
	return v.result("zero-failures", summary)
}

func countsString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// AnsweredAfterTakeover checks that every call clear of the faults succeeded: a call is
// excused only when its [invoke, complete] interval meets [fault start, fault end +
// window) of some fault, window being the longest the design lets a takeover take,
// cut at the end of the fault's cycle (Fault.Until). So a call in flight when a holder
// was killed may fail, and so may a call sent before the successor could have taken
// over; every other call must be answered.
func AnsweredAfterTakeover(h []bench.Op, faults []Fault, window time.Duration) Result {
	ops := measured(h)
	var v violations
	required := 0
	near := nearFaults(ops, faults, window)
	for _, op := range ops {
		if excused(op, near, window) {
			continue
		}
		required++
		if op.Failed() {
			v.add("%s", describe(op))
		}
	}
	summary := fmt.Sprintf("%d calls clear of %d fault(s) + %s takeover window, all answered", required, len(faults), window)
	if v.count > 0 {
		summary = fmt.Sprintf("%d of %d calls clear of %d fault(s) + %s takeover window failed", v.count, required, len(faults), window)
	}
	return v.result("answered-after-takeover", summary)
}

// closes is when a fault's excuse ends: its end plus window, cut at the end of its
// cycle.
func closes(f Fault, window time.Duration) time.Time {
	end := f.End
	if end.Before(f.Start) {
		end = f.Start
	}
	c := end.Add(window)
	if !f.Until.IsZero() && f.Until.Before(c) {
		c = f.Until
	}
	if c.Before(end) {
		c = end
	}
	return c
}

func excused(op bench.Op, faults []Fault, window time.Duration) bool {
	for _, f := range faults {
		// [invoke, complete] meets [start, closes)
		if op.Invoke.Before(closes(f, window)) && !op.Complete.Before(f.Start) {
			return true
		}
	}
	return false
}

// nearFaults keeps the faults that can excuse one of ops at all, those whose excuse
// meets [earliest invocation, latest completion]: a cycle's calls meet a few of a
// long soak's thousand faults.
func nearFaults(ops []bench.Op, faults []Fault, window time.Duration) []Fault {
	if len(ops) == 0 {
		return nil
	}
	first, last := ops[0].Invoke, ops[0].Complete
	for _, op := range ops {
		if op.Invoke.Before(first) {
			first = op.Invoke
		}
		if op.Complete.After(last) {
			last = op.Complete
		}
	}
	var out []Fault
	for _, f := range faults {
		if first.Before(closes(f, window)) && !last.Before(f.Start) {
			out = append(out, f)
		}
	}
	return out
}

// AnsweredOnlyBy checks that every call in the window [from, to) succeeded and was
// answered by instance: after a paused holder resumes, only the new holder answers.
// A call is in the window when it was invoked at or after from and completed before
// to, the end of the cycle (zero: no end); a call still in flight then ran into the
// next cycle, whose faults are not this window's business, and is not judged.
func AnsweredOnlyBy(h []bench.Op, from, to time.Time, instance string) Result {
	var v violations
	n, late := 0, 0
	for _, op := range measured(h) {
		if op.Invoke.Before(from) || (!to.IsZero() && !op.Invoke.Before(to)) {
			continue
		}
		if !to.IsZero() && !op.Complete.Before(to) {
			late++
			continue
		}
		n++
		switch {
		case op.Failed():
			v.add("failed: %s", describe(op))
		case op.Instance != instance:
			v.add("answered by another instance than %s: %s", short(instance), describe(op))
		}
	}
	window := "from " + stamp(from)
	if !to.IsZero() {
		window += " to " + stamp(to)
	}
	summary := fmt.Sprintf("%d calls invoked %s, all answered by %s", n, window, short(instance))
	if n == 0 {
		v.add("no call was invoked %s, so nothing shows who answered", window)
		summary = "no call invoked " + window
	} else if v.count > 0 {
		summary = fmt.Sprintf("%d of %d calls invoked %s were not answered by %s", v.count, n, window, short(instance))
	}
	if late > 0 {
		summary += fmt.Sprintf("; %d call(s) still in flight when the window ended left out", late)
	}
	return v.result("answered-only-by", summary)
}

// span is the stretch over which the recorded calls prove an instance accepted calls.
type span struct {
	instance    string
	first, last bench.Op // first: earliest completion; last: latest invocation
	calls       int
}

// Overlap is the proven overlap between two instances.
type Overlap struct {
	A, B     string
	Duration time.Duration
	// Earlier is the call whose completion starts the overlap (the later of the two
	// instances' first completions); Later the call whose invocation ends it.
	Earlier, Later bench.Op
}

// Overlaps computes, for every pair of instances that answered successful calls, how
// long the recorded calls prove both accepted calls at once (see NoOverlap), largest
// first, leaving out pairs with no proven overlap.
func Overlaps(h []bench.Op) []Overlap {
	spans := map[string]*span{}
	for _, op := range measured(h) {
		if op.Failed() || op.Instance == "" {
			continue
		}
		s := spans[op.Instance]
		if s == nil {
			spans[op.Instance] = &span{instance: op.Instance, first: op, last: op, calls: 1}
			continue
		}
		s.calls++
		if op.Complete.Before(s.first.Complete) {
			s.first = op
		}
		if op.Invoke.After(s.last.Invoke) {
			s.last = op
		}
	}
	ids := make([]string, 0, len(spans))
	for id := range spans {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []Overlap
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			sa, sb := spans[a], spans[b]
			earlier := sa.first
			if sb.first.Complete.After(earlier.Complete) {
				earlier = sb.first
			}
			later := sa.last
			if sb.last.Invoke.Before(later.Invoke) {
				later = sb.last
			}
			if d := later.Invoke.Sub(earlier.Complete); d > 0 {
				out = append(out, Overlap{A: a, B: b, Duration: d, Earlier: earlier, Later: later})
			}
		}
	}
	slices.SortStableFunc(out, func(x, y Overlap) int { return int(y.Duration - x.Duration) })
	return out
}

// NoOverlap checks that no two engine instances provably accepted calls at the same
// time for longer than allowance, the designed handover overlap.
//
// The proof uses the client's records only. A call answered by instance X reached X
// at some moment within [invoke, complete]. So X surely accepted calls at some moment
// no later than the earliest completion among its calls, and at some moment no
// earlier than the latest invocation among them; an engine subscribes once and
// unsubscribes once, so it accepted throughout [earliest completion, latest
// invocation]. Two such stretches that intersect prove that both instances accepted
// calls at once for at least the length of the intersection. Calls an old engine
// received before it stopped accepting but answered later (the drain) do not stretch
// it: only invocation times end a stretch. Failed calls and error replies prove nothing
// and are left out.
//
// In a clean handover (release, then unsubscribe) the successor may subscribe a moment
// before the old engine's unsubscribe reaches the broker: that is the designed overlap,
// bounded by allowance. After a crash, a pause or a cut, the allowance is 0.
func NoOverlap(h []bench.Op, allowance time.Duration) Result {
	ovs := Overlaps(h)
	var v violations
	for _, o := range ovs {
		if o.Duration > allowance {
			v.add("%s and %s both accepted calls for at least %s (allowed %s): %s, then %s",
				short(o.A), short(o.B), o.Duration.Round(time.Microsecond), allowance, describe(o.Earlier), describe(o.Later))
		}
	}
	instances := map[string]bool{}
	for _, op := range measured(h) {
		if !op.Failed() && op.Instance != "" {
			instances[op.Instance] = true
		}
	}
	summary := fmt.Sprintf("%d instances answered; no proven overlap", len(instances))
	if len(ovs) > 0 {
		summary = fmt.Sprintf("%d instances answered; largest proven overlap %s (%s, %s), allowed %s",
			len(instances), ovs[0].Duration.Round(time.Microsecond), short(ovs[0].A), short(ovs[0].B), allowance)
	}
	return v.result("no-overlap", summary)
}

// Proc is a child process the scenario started.
type Proc struct {
	Name     string `json:"name"`
	PID      int    `json:"pid"`
	Exited   bool   `json:"exited"`
	ExitCode int    `json:"exit_code"`
}

// NoLeaks checks that nothing outlived the scenario: goroutines lists the goroutines
// still running that were not there before it (as goleak reports them), and every
// process it started must have exited.
func NoLeaks(goroutines []string, procs []Proc) Result {
	var v violations
	for _, g := range goroutines {
		v.add("goroutine still running: %s", firstLines(g, 4))
	}
	for _, p := range procs {
		if !p.Exited {
			v.add("process %s (pid %d) still running", p.Name, p.PID)
		}
	}
	summary := fmt.Sprintf("no goroutine left; %d process(es) started, all exited", len(procs))
	if v.count > 0 {
		summary = fmt.Sprintf("%d leak(s): %d goroutine(s), %d process(es) still running", v.count, len(goroutines), v.count-len(goroutines))
	}
	return v.result("no-leaks", summary)
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// FencedWithin checks that an engine cut off at cut fenced (stopped serving) within
// bound: the design fences lease/2 after the last successful renewal was sent, which
// was no later than the cut. A zero fenced means it never fenced.
func FencedWithin(cut, fenced time.Time, bound time.Duration) Result {
	var v violations
	if fenced.IsZero() {
		v.add("cut off at %s and never fenced", stamp(cut))
		return v.result("fenced-within", fmt.Sprintf("never fenced (bound %s)", bound))
	}
	d := fenced.Sub(cut)
	if d > bound {
		v.add("cut off at %s, fenced at %s: %s after the cut, bound %s", stamp(cut), stamp(fenced), d.Round(time.Millisecond), bound)
	}
	return v.result("fenced-within", fmt.Sprintf("fenced %s after the cut (bound %s)", d.Round(time.Millisecond), bound))
}

// LeaseEvent is one value of the lease key as an observer watching it saw it.
type LeaseEvent struct {
	At       time.Time `json:"at"`
	Revision uint64    `json:"revision"`
	// Holder is the holder's instance id; "" when the lease is free, ForeignHolder when
	// the value names no engine.
	Holder string `json:"holder"`
}

// ForeignHolder is LeaseEvent.Holder for a value that names no engine.
const ForeignHolder = "foreign"

// TakeoverAfterSilence checks that the first change of holder after from came only
// after the lease had been silent a full lease period: the time between the last
// revision written before the takeover and the takeover itself is at least lease minus
// tolerance (the observer and the contender see a revision at slightly different
// moments). The takeover must have happened.
func TakeoverAfterSilence(events []LeaseEvent, from time.Time, lease, tolerance time.Duration) Result {
	var v violations
	old := ""
	var last *LeaseEvent
	for i := range events {
		e := &events[i]
		if e.At.Before(from) {
			old, last = e.Holder, e
			continue
		}
		if e.Holder == old || e.Holder == "" || e.Holder == ForeignHolder {
			last = e
			continue
		}
		if last == nil {
			v.add("holder %s took over at %s with no earlier revision observed", short(e.Holder), stamp(e.At))
			return v.result("takeover-after-silence", "no earlier revision observed")
		}
		silence := e.At.Sub(last.At)
		if silence < lease-tolerance {
			v.add("holder %s took over at %s (revision %d) only %s after revision %d of %s; a lease is %s",
				short(e.Holder), stamp(e.At), e.Revision, silence.Round(time.Millisecond), last.Revision, holderName(last.Holder), lease)
		}
		return v.result("takeover-after-silence", fmt.Sprintf("%s took over after %s of silence (lease %s, tolerance %s)",
			short(e.Holder), silence.Round(time.Millisecond), lease, tolerance))
	}
	v.add("no other holder took the lease after %s", stamp(from))
	return v.result("takeover-after-silence", "no takeover observed")
}

func holderName(h string) string {
	if h == "" {
		return "nobody (free)"
	}
	return short(h)
}

// Interval is a stretch of time during which an instance served.
type Interval struct {
	Instance string    `json:"instance"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
}

// ServingGap checks that within [from, to] no stretch longer than bound passed without
// any engine serving, given when each instance served. The stretches are judged over
// the whole window, not cut at cycles (a cut would split a long gap in two short
// ones); each violation names the cycle in which the stretch began.
func ServingGap(serving []Interval, from, to time.Time, bound time.Duration, cycles Cycles) Result {
	var v violations
	var worst time.Duration
	for _, g := range holes(serving, from, to) {
		worst = max(worst, g.d)
		if g.d > bound {
			v.add("%sno engine served from %s for %s (bound %s)", cycles.where(g.from), stamp(g.from), g.d.Round(time.Millisecond), bound)
		}
	}
	return v.result("serving-gap", fmt.Sprintf("longest stretch without a serving engine %s (bound %s)", worst.Round(time.Millisecond), bound))
}

// hole is a stretch of a window that no interval covers.
type hole struct {
	from time.Time
	d    time.Duration
}

// holes are the stretches of [from, to] that no interval of ivs covers, in order.
func holes(ivs []Interval, from, to time.Time) []hole {
	ivs = slices.Clone(ivs)
	slices.SortFunc(ivs, func(a, b Interval) int { return a.From.Compare(b.From) })
	var out []hole
	covered := from // everything before covered is covered (or outside the window)
	for _, iv := range ivs {
		if !iv.To.After(covered) {
			continue
		}
		if iv.From.After(to) {
			break
		}
		if iv.From.After(covered) {
			out = append(out, hole{from: covered, d: iv.From.Sub(covered)})
		}
		covered = iv.To
	}
	if covered.Before(to) {
		out = append(out, hole{from: covered, d: to.Sub(covered)})
	}
	return out
}

// where is the prefix naming the cycle of t ("" without cycles).
func (cs Cycles) where(t time.Time) string {
	if len(cs) == 0 {
		return ""
	}
	return cs.Of(t).String() + ": "
}
