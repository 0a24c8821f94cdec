package chaos

import (
	"fmt"
	"time"

	"github.com/abi-engine/engine/chaos/check"
)

// leaseConnection is the start of the name every engine gives its lease connection
// ("abi-engine-ownership@<host>"): clock-skew cuts it alone.
const leaseConnection = "abi-engine-ownership@"

// clockSkew: one engine's lease clock runs Options.ClockRate times as fast as the
// others' (fail point clock-rate). The holder's lease connection alone is cut, so it
// goes on answering calls until it fences on its own clock (lease/2 after its last
// renewal), while the standby takes over once it has seen no renewal for a lease on
// its clock. In odd cycles the fast clock is the standby's: it takes over after
// lease/rate of real time, so the engine stays safe while rate < lease/fence = 2. In
// even cycles it is the holder's, which fences and renews early: safe at any rate.
func clockSkew(h *harness) error {
	rate := h.opts.ClockRate
	fast := fmt.Sprintf("clock-rate=%g", rate)
	if err := h.startBroker(); err != nil {
		return err
	}
	cur, err := h.startInproc("r1", true)
	if err != nil {
		return err
	}
	curRate := 1.0
	var faults []check.Fault
	rollout := 1
	for n := 0; h.cycles(n, 2); n++ {
		rollout++
		standbyRate, spec := rate, fast
		if n%2 == 1 {
			standbyRate, spec = 1, ""
		}
		standby, err := h.startInproc(fmt.Sprintf("r%d", rollout), true, spec)
		if err != nil {
			return err
		}
		if n == 0 {
			if err := h.startTraffic(); err != nil {
				return err
			}
		}
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		cut := h.between(2*h.lease, 3*h.lease)
		cutAt := h.fault(cur.nm, "lease connection cut for %s (its service connection carries on); lease clocks: holder %gx, standby %gx",
			cut.Round(time.Millisecond), curRate, standbyRate)
		cur.proxy.CutConnections(leaseConnection)
		if err := h.sleep(cut); err != nil {
			return err
		}
		cur.proxy.Restore()
		restoreAt := h.fault(cur.nm, "lease connection restored")
		faults = append(faults, check.Fault{Name: "lease cut " + cur.nm, Start: cutAt, End: restoreAt})
		// Each engine keeps time on its own clock: the holder fences lease/2 after its
		// last renewal on its clock, the standby waits a lease of silence on its own.
		h.checkNow(check.FencedWithin(cutAt, cur.mon.entered("fenced", cutAt), realOn(h.lease/2, curRate)+h.lease/5))
		h.waitTakeoverObserved(cutAt)
		h.checkNow(check.TakeoverAfterSilence(h.leaseEvents(), cutAt, realOn(h.lease, standbyRate), observerTolerance))
		if err := h.cutHolderEnds(cur, standby); err != nil {
			return err
		}
		cur, curRate = standby, standbyRate
	}
	return h.endCuts(faults)
}

// realOn is how long d on a clock running rate times as fast lasts in real time.
func realOn(d time.Duration, rate float64) time.Duration {
	return time.Duration(float64(d) / rate)
}
