package check

import (
	"fmt"
	"time"
)

// ServingGapWhileStoreUp is ServingGap on stores that can themselves be unavailable:
// storeDown are the stretches one of the engines' stores could take no write (on a
// cluster, one of their streams had no leader), when no engine can serve, however good
// it is: without the lease's store none can renew or take the lease, without a data
// store none can adopt its epoch there (which it must before it serves) nor answer its
// calls. Those stretches are left out, so what is judged is what the engines control:
// no stretch longer than bound without a serving engine while the stores could take
// writes, the time after they came back included. A stretch without a
// serving engine that began before the store went down is judged up to then, and what
// remains of it after the store is back on its own.
//
// The stores' unavailability is a figure of the summary, not a violation: the broker's
// raft election, not the engine, decides how long it lasts.
func ServingGapWhileStoreUp(serving, storeDown []Interval, from, to time.Time, bound time.Duration, cycles Cycles) Result {
	var v violations
	var worst time.Duration
	covered := append(append([]Interval(nil), serving...), storeDown...)
	for _, g := range holes(covered, from, to) {
		worst = max(worst, g.d)
		if g.d > bound {
			v.add("%sno engine served from %s for %s while the stores could take writes (bound %s)",
				cycles.where(g.from), stamp(g.from), g.d.Round(time.Millisecond), bound)
		}
	}
	var down, longest time.Duration
	n := 0
	for _, iv := range storeDown {
		lo, hi := maxTime(iv.From, from), minTime(iv.To, to)
		if !hi.After(lo) {
			continue
		}
		n++
		down += hi.Sub(lo)
		longest = max(longest, hi.Sub(lo))
	}
	return v.result("serving-gap", fmt.Sprintf("longest stretch without a serving engine while the stores could take writes %s (bound %s); a store could take none for %s in all (%d stretch(es), longest %s; not judged)",
		worst.Round(time.Millisecond), bound, down.Round(time.Millisecond), n, longest.Round(time.Millisecond)))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
