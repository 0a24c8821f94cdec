package check

import (
	"fmt"
	"time"
)

// ServingGapWhileStoreUp is ServingGap on a store that can itself be unavailable:
// storeDown are the stretches the lease's store could take no write (on a cluster, the
// lease stream had no leader), when no engine can renew or take the lease, however
// good it is. Those stretches are left out, so what is judged is what the engines
// control: no stretch longer than bound without a serving engine while the store could
// take writes, the time after the store came back included. A stretch without a
// serving engine that began before the store went down is judged up to then, and what
// remains of it after the store is back on its own.
//
// The store's unavailability is a figure of the summary, not a violation: the broker's
// raft election, not the engine, decides how long it lasts.
func ServingGapWhileStoreUp(serving, storeDown []Interval, from, to time.Time, bound time.Duration, cycles Cycles) Result {
	var v violations
	var worst time.Duration
	covered := append(append([]Interval(nil), serving...), storeDown...)
	for _, g := range holes(covered, from, to) {
		worst = max(worst, g.d)
		if g.d > bound {
			v.add("%sno engine served from %s for %s while the lease's store could take writes (bound %s)",
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
	return v.result("serving-gap", fmt.Sprintf("longest stretch without a serving engine while the lease's store could take writes %s (bound %s); the store could take none %d time(s), %s in all, longest %s (not judged)",
		worst.Round(time.Millisecond), bound, n, down.Round(time.Millisecond), longest.Round(time.Millisecond)))
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
