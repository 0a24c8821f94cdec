package check

import (
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/protocol"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

const (
	instA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	instB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	instC = "cccccccccccccccccccccccccccccccc"
)

// ok is a successful call answered by inst.
func ok(kind, key, inst string, from, to int) bench.Op {
	return bench.Op{Kind: kind, Key: key, Instance: inst, Invoke: at(from), Complete: at(to)}
}

func set(key, inst string, v uint64, from, to int) bench.Op {
	op := ok(protocol.OpSet, key, inst, from, to)
	op.Input = v
	return op
}

func get(key, inst string, v uint64, from, to int) bench.Op {
	op := ok(protocol.OpGet, key, inst, from, to)
	op.Found, op.Output = v != 0, v
	return op
}

func sine(key, inst string, v uint64, applied bool, from, to int) bench.Op {
	op := ok(protocol.OpSetIfNotExists, key, inst, from, to)
	op.Input, op.Applied = v, applied
	return op
}

func del(key, inst string, applied bool, from, to int) bench.Op {
	op := ok(protocol.OpDelete, key, inst, from, to)
	op.Applied = applied
	return op
}

func failed(op bench.Op, code protocol.Code, indefinite bool) bench.Op {
	op.Code, op.Err, op.Indefinite = code, "synthetic failure", indefinite
	op.Instance = ""
	return op
}

func wantPass(t *testing.T, r Result) {
	t.Helper()
	if !r.Passed || r.Count != 0 {
		t.Fatalf("%s failed: %s\n%s", r.Name, r.Summary, strings.Join(r.Details, "\n"))
	}
}

func wantFail(t *testing.T, r Result, count int, mention string) {
	t.Helper()
	if r.Passed {
		t.Fatalf("%s passed: %s", r.Name, r.Summary)
	}
	if count >= 0 && r.Count != count {
		t.Fatalf("%s: %d violations, want %d: %s", r.Name, r.Count, count, strings.Join(r.Details, "\n"))
	}
	if !strings.Contains(strings.Join(r.Details, "\n"), mention) {
		t.Fatalf("%s: details do not mention %q:\n%s", r.Name, mention, strings.Join(r.Details, "\n"))
	}
}

func TestZeroFailures(t *testing.T) {
	h := []bench.Op{
		set("k", instA, 1, 0, 5),
		get("k", instA, 1, 6, 8),
		// Seeding/cleanup and calls the run's own end cancelled are not judged.
		func() bench.Op {
			o := failed(get("k", "", 0, 1, 2), protocol.Unavailable, false)
			o.Setup = true
			return o
		}(),
		func() bench.Op {
			o := failed(get("k", "", 0, 9, 10), protocol.DeadlineExceeded, true)
			o.Interrupted = true
			return o
		}(),
	}
	wantPass(t, ZeroFailures(h))
	h = append(h, failed(set("k", "", 2, 20, 25), protocol.Unavailable, false))
	r := ZeroFailures(h)
	wantFail(t, r, 1, "UNAVAILABLE")
	if !strings.Contains(r.Summary, "1 of 3") {
		t.Fatalf("summary %q", r.Summary)
	}
}

func TestAnsweredAfterTakeover(t *testing.T) {
	kill := []Fault{{Name: "SIGKILL", Start: at(1000), End: at(1000)}}
	h := []bench.Op{
		set("k", instA, 1, 900, 905),
		failed(set("k", "", 2, 990, 4000), protocol.DeadlineExceeded, true), // in flight at the kill
		failed(get("k", "", 0, 1500, 1600), protocol.Unavailable, false),    // inside the window
		set("k", instB, 3, 2100, 2110),
	}
	wantPass(t, AnsweredAfterTakeover(h, kill, time.Second))
	late := failed(get("k", "", 0, 2200, 2300), protocol.Unavailable, false)
	wantFail(t, AnsweredAfterTakeover(append(h, late), kill, time.Second), 1, "07.200000")
	// A call before any fault must be answered too.
	early := failed(get("k", "", 0, 100, 200), protocol.Internal, true)
	wantFail(t, AnsweredAfterTakeover(append(h, early), kill, time.Second), 1, "03:04:05.100000")
	// A fault with a duration (a pause) counts from its end.
	pause := []Fault{{Name: "SIGSTOP", Start: at(1000), End: at(3000)}}
	wantPass(t, AnsweredAfterTakeover(append(h, late), pause, time.Second))
}

func TestAnsweredOnlyBy(t *testing.T) {
	h := []bench.Op{
		get("k", instA, 0, 0, 10),
		failed(get("k", "", 0, 50, 3000), protocol.DeadlineExceeded, true), // before the resume
		get("k", instB, 0, 3100, 3110),
		set("k", instB, 4, 3120, 3130),
	}
	open := time.Time{}
	wantPass(t, AnsweredOnlyBy(h, at(3050), open, instB))
	wantFail(t, AnsweredOnlyBy(append(h, get("k", instA, 4, 3200, 3210)), at(3050), open, instB), 1, "answered by another instance")
	wantFail(t, AnsweredOnlyBy(append(h, failed(get("k", "", 0, 3200, 3300), protocol.Unavailable, false)), at(3050), open, instB), 1, "failed")
	wantFail(t, AnsweredOnlyBy(h, at(5000), open, instB), 1, "no call was invoked")

	// The window ends with the cycle at 6000: a call invoked after it, or still in
	// flight then (the next cycle paused B), is not judged.
	next := append(h[:len(h):len(h)],
		failed(get("k", "", 0, 5990, 8000), protocol.DeadlineExceeded, true),
		get("k", instC, 0, 6100, 6110))
	r := AnsweredOnlyBy(next, at(3050), at(6000), instB)
	wantPass(t, r)
	if !strings.Contains(r.Summary, "2 calls invoked from 03:04:08.050000 to 03:04:11.000000") || !strings.Contains(r.Summary, "1 call(s) still in flight when the window ended left out") {
		t.Fatalf("summary %q", r.Summary)
	}
	wantFail(t, AnsweredOnlyBy(next, at(3050), open, instB), 2, "answered by another instance")
}

func TestAnsweredAfterTakeoverWindowEndsWithItsCycle(t *testing.T) {
	// A kill at 1000 whose cycle ends at 1500, when the successor served: a call that
	// fails at 1700, in the next cycle, is not excused by the first kill's 1 s window.
	kill := []Fault{{Name: "SIGKILL", Start: at(1000), End: at(1000), Until: at(1500)}}
	late := []bench.Op{failed(get("k", "", 0, 1700, 1800), protocol.Unavailable, false)}
	wantFail(t, AnsweredAfterTakeover(late, kill, time.Second), 1, "03:04:06.700000")
	kill[0].Until = time.Time{}
	wantPass(t, AnsweredAfterTakeover(late, kill, time.Second))
	// A call in flight at a fault is excused whichever cycle it was sent in.
	inFlight := []bench.Op{failed(get("k", "", 0, 900, 4000), protocol.DeadlineExceeded, true)}
	next := []Fault{{Name: "SIGKILL", Start: at(1000), End: at(1000), Until: at(1000)}}
	wantPass(t, AnsweredAfterTakeover(inFlight, next, time.Second))
}

func TestNoOverlapCleanHandover(t *testing.T) {
	// A answers until its unsubscribe; a call it received just before (invoked at 999)
	// is answered during the drain, after B already answered calls: legitimate.
	h := []bench.Op{
		set("k", instA, 1, 0, 5),
		get("k", instA, 1, 990, 995),
		set("k", instA, 2, 999, 1500), // received before the unsubscribe, answered in the drain
		get("k", instB, 2, 1001, 1010),
		set("k", instB, 3, 1020, 1030),
	}
	r := NoOverlap(h, 0)
	wantPass(t, r)
	if !strings.Contains(r.Summary, "no proven overlap") {
		t.Fatalf("summary %q", r.Summary)
	}
	if ovs := Overlaps(h); len(ovs) != 0 {
		t.Fatalf("overlaps %+v", ovs)
	}
}

func TestNoOverlapDesignedOverlap(t *testing.T) {
	// B subscribed and answered (complete 1005) just before A's unsubscribe took effect:
	// A received a call invoked at 1008. Proven overlap 3 ms.
	h := []bench.Op{
		set("k", instA, 1, 0, 5),
		get("k", instB, 1, 1001, 1005),
		get("k", instA, 1, 1008, 1009),
		get("k", instB, 1, 1010, 1012),
	}
	ovs := Overlaps(h)
	if len(ovs) != 1 || ovs[0].Duration != 3*time.Millisecond {
		t.Fatalf("overlaps %+v", ovs)
	}
	wantPass(t, NoOverlap(h, 250*time.Millisecond))
	wantFail(t, NoOverlap(h, 0), 1, "at least 3ms")
}

func TestNoOverlapIgnoresFailures(t *testing.T) {
	// A fenced engine's UNAVAILABLE replies carry its instance but ran nothing.
	fenced := failed(get("k", "", 0, 2000, 2001), protocol.Unavailable, false)
	fenced.Instance = instA
	h := []bench.Op{
		set("k", instA, 1, 0, 5),
		get("k", instB, 1, 1500, 1505),
		fenced,
		get("k", instB, 1, 2002, 2010),
	}
	wantPass(t, NoOverlap(h, 0))
}

func TestNoOverlapZombie(t *testing.T) {
	// A keeps answering calls invoked long after B took over: two instances at once.
	h := []bench.Op{
		set("k", instA, 1, 0, 5),
		set("k", instB, 2, 1000, 1005),
		get("k", instA, 1, 1500, 1505),
		get("k", instB, 2, 1600, 1605),
		get("k", instC, 2, 5000, 5001),
	}
	r := NoOverlap(h, 250*time.Millisecond)
	wantFail(t, r, 1, "for at least 495ms")
	if !strings.Contains(r.Details[0], "aaaaaaaa and bbbbbbbb") {
		t.Fatalf("details %q", r.Details)
	}
}

func TestLinearizable(t *testing.T) {
	h := []bench.Op{
		get("k", instA, 0, 0, 1), // absent at first
		set("k", instA, 1, 2, 4),
		get("k", instA, 1, 3, 6), // concurrent with the set: may see it
		set("j", instA, 7, 3, 5), // another key
		get("k", instB, 1, 10, 12),
		// A write whose outcome is unknown may land any time after its invocation.
		failed(set("k", "", 2, 20, 30), protocol.DeadlineExceeded, true),
		get("k", instB, 1, 31, 32),
		get("k", instB, 2, 40, 41),
		// A write that surely did not run is left out; a failed read too.
		failed(set("k", "", 9, 50, 51), protocol.Unavailable, false),
		failed(get("k", "", 0, 50, 51), protocol.DeadlineExceeded, true),
		get("k", instB, 2, 52, 53),
		del("k", instB, true, 60, 61),
		get("k", instB, 0, 62, 63),
		ok(protocol.OpPutObject, "x/1", instB, 60, 61), // not keyvalue
	}
	wantPass(t, Linearizable(h, 5*time.Second))

	// A stale read after a newer write completed: not linearizable.
	stale := append(h[:len(h):len(h)], set("k", instB, 3, 70, 71), get("k", instA, 2, 72, 73))
	wantFail(t, Linearizable(stale, 5*time.Second), 1, `key "k"`)
	// A write that surely did not run must not be seen.
	ghost := append(h[:len(h):len(h)], get("k", instB, 9, 70, 71))
	wantFail(t, Linearizable(ghost, 5*time.Second), 1, `key "k"`)
	// A read of a missing key after a set completed.
	lost := []bench.Op{set("k", instA, 1, 0, 1), get("k", instB, 0, 2, 3)}
	wantFail(t, Linearizable(lost, 5*time.Second), 1, `key "k"`)
}

// TestLinearizableConditionalWrites: set_if_not_exists and delete answer what they
// found, so a write applied twice (set, then "not set" by its own resend) shows.
func TestLinearizableConditionalWrites(t *testing.T) {
	h := []bench.Op{
		sine("k", instA, 1, true, 0, 1),  // absent: set
		sine("k", instA, 2, false, 2, 3), // present: not set
		get("k", instA, 1, 4, 5),
		del("k", instA, true, 6, 7),
		del("k", instA, false, 8, 9), // absent: nothing deleted
		sine("k", instA, 3, true, 10, 11),
		get("k", instA, 3, 12, 13),
	}
	wantPass(t, Linearizable(h, 5*time.Second))
	// A set_if_not_exists that set the key, answered "not set" (a resend found its own
	// value): the value it wrote is read, and nothing else wrote it.
	twice := []bench.Op{sine("k", instA, 1, false, 0, 1), get("k", instA, 1, 2, 3)}
	wantFail(t, Linearizable(twice, 5*time.Second), 1, `key "k"`)
	// A delete answered "not deleted" between two reads of a value and of nothing.
	lostDelete := []bench.Op{set("k", instA, 1, 0, 1), get("k", instA, 1, 2, 3), del("k", instA, false, 4, 5), get("k", instA, 0, 6, 7)}
	wantFail(t, Linearizable(lostDelete, 5*time.Second), 1, `key "k"`)
	// set_if_not_exists of a present key that claims to have set it.
	present := []bench.Op{set("k", instA, 1, 0, 1), sine("k", instA, 2, true, 2, 3)}
	wantFail(t, Linearizable(present, 5*time.Second), 1, `key "k"`)
}

// TestLinearizableUnknownOutcomes: a conditional write of unknown outcome may have
// taken effect at any moment after its invocation, or never, and any answer is its own:
// it invents no violation, whichever way the reads went, and hides none.
func TestLinearizableUnknownOutcomes(t *testing.T) {
	lost := func(op bench.Op) bench.Op { return failed(op, protocol.DeadlineExceeded, true) }
	for name, h := range map[string][]bench.Op{
		"its value is seen later":       {lost(sine("k", "", 1, false, 0, 1)), get("k", instA, 0, 2, 3), get("k", instA, 1, 4, 5)},
		"its value is never seen":       {lost(sine("k", "", 1, false, 0, 1)), get("k", instA, 0, 2, 3), get("k", instA, 0, 40, 41)},
		"it found the key present":      {set("k", instA, 2, 0, 1), lost(sine("k", "", 1, false, 2, 3)), get("k", instA, 2, 4, 5)},
		"a delete that took effect":     {set("k", instA, 2, 0, 1), lost(del("k", "", false, 2, 3)), get("k", instA, 0, 4, 5)},
		"a delete that never did":       {set("k", instA, 2, 0, 1), lost(del("k", "", false, 2, 3)), get("k", instA, 2, 40, 41)},
		"a delete later than the reads": {set("k", instA, 2, 0, 1), lost(del("k", "", true, 2, 3)), get("k", instA, 2, 4, 5), get("k", instA, 0, 50, 51)},
	} {
		if r := Linearizable(h, 5*time.Second); !r.Passed {
			t.Errorf("%s: an unknown outcome invented a violation: %s %v", name, r.Summary, r.Details)
		}
	}
	for name, h := range map[string][]bench.Op{
		// The value is read before the write that alone could have written it was sent.
		"read before its invocation": {get("k", instA, 1, 0, 1), lost(sine("k", "", 1, false, 2, 3))},
		// A definite violation (a set answered "not set" on an absent key) next to an
		// unknown write of another value.
		"beside a definite violation": {lost(sine("k", "", 2, false, 0, 1)), sine("k", instA, 1, false, 10, 11), get("k", instA, 1, 12, 13)},
		// An unknown delete cannot bring back a value overwritten before it.
		"a value it cannot restore": {set("k", instA, 1, 0, 1), set("k", instA, 2, 2, 3), lost(del("k", "", false, 4, 5)), get("k", instA, 1, 6, 7)},
	} {
		if r := Linearizable(h, 5*time.Second); r.Passed {
			t.Errorf("%s: an unknown outcome hid a violation: %s", name, r.Summary)
		}
	}
}

func TestNoLeaks(t *testing.T) {
	procs := []Proc{{Name: "engine-1", PID: 10, Exited: true}, {Name: "engine-2", PID: 11, Exited: true, ExitCode: 1}}
	wantPass(t, NoLeaks(nil, procs))
	wantFail(t, NoLeaks([]string{"goroutine 7 [chan receive]:\nmain.loop()\n\t/x.go:1"}, procs), 1, "main.loop()")
	procs[1].Exited = false
	wantFail(t, NoLeaks(nil, procs), 1, "engine-2 (pid 11) still running")
}

func TestFencedWithin(t *testing.T) {
	wantPass(t, FencedWithin(at(0), at(480), 500*time.Millisecond))
	wantFail(t, FencedWithin(at(0), at(900), 500*time.Millisecond), 1, "900ms after the cut")
	wantFail(t, FencedWithin(at(0), time.Time{}, 500*time.Millisecond), 1, "never fenced")
}

func TestTakeoverAfterSilence(t *testing.T) {
	ev := []LeaseEvent{
		{At: at(0), Revision: 1, Holder: instA},
		{At: at(250), Revision: 2, Holder: instA},
		{At: at(500), Revision: 3, Holder: instA}, // last renewal before the cut at 600
		{At: at(1520), Revision: 4, Holder: instB},
	}
	wantPass(t, TakeoverAfterSilence(ev, at(600), time.Second, 50*time.Millisecond))
	early := []LeaseEvent{ev[0], ev[1], ev[2], {At: at(1100), Revision: 4, Holder: instB}}
	wantFail(t, TakeoverAfterSilence(early, at(600), time.Second, 50*time.Millisecond), 1, "only 600ms after revision 3")
	wantFail(t, TakeoverAfterSilence(ev[:3], at(600), time.Second, 50*time.Millisecond), 1, "no other holder")
	// A foreign value is not a takeover; the engine that takes over after it is, and the
	// silence counts from the foreign value.
	foreign := []LeaseEvent{ev[0], {At: at(600), Revision: 2, Holder: ForeignHolder}, {At: at(1650), Revision: 3, Holder: instB}}
	wantPass(t, TakeoverAfterSilence(foreign, at(300), time.Second, 50*time.Millisecond))
}

func TestServingGap(t *testing.T) {
	serving := []Interval{
		{Instance: instA, From: at(0), To: at(1000)},
		{Instance: instA, From: at(1400), To: at(3000)}, // fenced 1000-1400, resumed
		{Instance: instB, From: at(3800), To: at(6000)},
	}
	wantPass(t, ServingGap(serving, at(0), at(6000), time.Second, nil))
	wantFail(t, ServingGap(serving, at(0), at(6000), 500*time.Millisecond, nil), 1, "for 800ms")
	// Nobody serving at the end of the window counts too.
	wantFail(t, ServingGap(serving, at(0), at(8000), time.Second, nil), 1, "for 2s")
	// Overlapping intervals are merged.
	wantPass(t, ServingGap([]Interval{{From: at(0), To: at(2000)}, {From: at(500), To: at(900)}, {From: at(1900), To: at(4000)}}, at(0), at(4000), 10*time.Millisecond, nil))
	// Every gap over the bound is named with the cycle it began in; a gap across a
	// cycle boundary is judged whole.
	cycles := Cycles{{N: 1, To: at(2000)}, {N: 2, From: at(2000), To: at(3500)}, {N: 3, From: at(3500)}}
	r := ServingGap(serving, at(0), at(6000), 300*time.Millisecond, cycles)
	wantFail(t, r, 2, "cycle 1: no engine served from 03:04:06.000000 for 400ms")
	wantFail(t, r, 2, "cycle 2: no engine served from 03:04:08.000000 for 800ms")
}
