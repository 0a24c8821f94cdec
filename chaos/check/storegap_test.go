package check

import (
	"strings"
	"testing"
	"time"
)

// TestServingGapWhileStoreUp: the stretches the store could take no write are left
// out; what remains of a gap before and after them is judged, each on its own.
func TestServingGapWhileStoreUp(t *testing.T) {
	serving := []Interval{
		{Instance: instA, From: at(0), To: at(1000)},
		{Instance: instA, From: at(6300), To: at(9000)}, // fenced 1000-6300
	}
	// A stream had no leader 1000-6000: the 300 ms after it are the engine's.
	down := []Interval{{Instance: "KV_ABI_ENGINE", From: at(1000), To: at(6000)}}
	r := ServingGapWhileStoreUp(serving, down, at(0), at(9000), time.Second, nil)
	wantPass(t, r)
	if !strings.Contains(r.Summary, "300ms") || !strings.Contains(r.Summary, "5s in all (1 stretch(es)") {
		t.Fatalf("summary %q does not give the engine's 300ms and the store's 5s", r.Summary)
	}
	// ServingGap alone fails the same history: the store's 5 s count against the engine.
	wantFail(t, ServingGap(serving, at(0), at(9000), time.Second, nil), 1, "for 5.3s")

	// An engine slow once the store is back fails: 1.5 s after the leader came back.
	slow := []Interval{
		{Instance: instA, From: at(0), To: at(1000)},
		{Instance: instB, From: at(7500), To: at(9000)},
	}
	wantFail(t, ServingGapWhileStoreUp(slow, down, at(0), at(9000), time.Second, nil), 1, "from 03:04:11.000000 for 1.5s while the stores could take writes")

	// A gap that began before the store went down is judged up to then: 1.2 s of it
	// while the store was up fails, though the part after the store came back is short.
	early := []Interval{
		{Instance: instA, From: at(0), To: at(1000)},
		{Instance: instA, From: at(2300), To: at(9000)},
	}
	down2 := []Interval{{From: at(2200), To: at(2250)}}
	wantFail(t, ServingGapWhileStoreUp(early, down2, at(0), at(9000), time.Second, nil), 1, "for 1.2s")

	// Nothing down: the same as ServingGap.
	wantFail(t, ServingGapWhileStoreUp(slow, nil, at(0), at(9000), time.Second, nil), 1, "for 6.5s")
	// Every gap names its cycle.
	cycles := Cycles{{N: 1, To: at(5000)}, {N: 2, From: at(5000)}}
	wantFail(t, ServingGapWhileStoreUp(slow, down, at(0), at(9000), time.Second, cycles), 1, "cycle 2: no engine served")
}
