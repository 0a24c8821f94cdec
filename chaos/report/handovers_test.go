package report

import (
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/protocol"
)

// The gap of a handover is read from the calls: the longest stretch between two
// successful replies that ends in its window, failed calls, interrupted ones and the
// setup's not being replies, and a stretch the traffic's end left open not being one;
// a stall after the handover was over is not its gap. Its steady figure is the same
// measure over as long a window halfway to the next handover, when there is room.
func TestHandoversMeasureTheCallersGap(t *testing.T) {
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	ok := func(ms int) bench.Op {
		return bench.Op{Kind: protocol.OpSet, Instance: idA, Invoke: at(ms - 1), Complete: at(ms)}
	}
	failed := func(ms int) bench.Op {
		o := ok(ms)
		o.Code, o.Err, o.Instance = protocol.Unavailable, "no engine", ""
		return o
	}
	h := []bench.Op{
		ok(0), ok(10), ok(20), // steady before the first handover
		// handover 1 at 25: the replies at 20 and 31 bound an 11 ms stretch (crossing
		// the handover), then 31 → 38.
		failed(28), ok(31), ok(38),
		// handover 2 at 40: an error reply at 45 answers nothing, the setup's and an
		// interrupted call's replies neither; 38 → 52 is 14 ms.
		failed(45), {Setup: true, Instance: idA, Complete: at(46)}, {Interrupted: true, Instance: idA, Complete: at(47)},
		ok(52), ok(55),
		// handover 3 at 60: no reply after it, the traffic stopped: no gap.
		// After every handover was over: the steady window of handover 3 (as long as
		// it, 40 ms, halfway between its end and the last reply: 250 to 290), whose
		// longest stretch is 262 → 290, and a stall no handover owns (290 → 400).
		ok(200), ok(249), ok(255), ok(262), ok(290), ok(400),
	}
	// Out of order, as a recorder's workers may leave them.
	h[0], h[4] = h[4], h[0]
	got := Handovers(h, []Handover{{At: at(25), Until: at(39)}, {At: at(40), Until: at(55)}, {At: at(60), Until: at(100)}})
	want := []Handover{
		{At: at(25), Until: at(39), Gap: 11 * time.Millisecond, GapFrom: at(20), Replies: 2},
		{At: at(40), Until: at(55), Gap: 14 * time.Millisecond, GapFrom: at(38), Replies: 2},
		{At: at(60), Until: at(100), Steady: 28 * time.Millisecond},
	}
	if len(got) != len(want) {
		t.Fatalf("Handovers = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("handover %d = %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

func TestTableListsTheHandovers(t *testing.T) {
	r := sample(t)
	r.Handovers = []Handover{
		{At: start.Add(2 * time.Second), Until: start.Add(2100 * time.Millisecond), Gap: 3500 * time.Microsecond, GapFrom: start.Add(1999 * time.Millisecond), Replies: 90, Steady: 2 * time.Millisecond},
		{At: start.Add(4 * time.Second), Until: start.Add(4100 * time.Millisecond), Gap: 12 * time.Millisecond, GapFrom: start.Add(4001 * time.Millisecond), Replies: 80},
	}
	var b strings.Builder
	if err := r.Table(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"handovers: 2; longest time without a successful reply per handover: median 3.5ms, max 12.0ms; in as long a window without one: median 2.0ms, max 2.0ms",
		"HANDOVER  AT",
		"1         +2.000s  +2.100s  3.5ms         +1.999s  90       2.0ms",
		"2         +4.000s  +4.100s  12.0ms",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, b.String())
		}
	}
}
