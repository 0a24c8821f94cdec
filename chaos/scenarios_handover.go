package chaos

import (
	"fmt"
	"time"

	"github.com/abi-engine/engine/chaos/check"
)

// handover: in-process engines of successive rollouts hand over by Engine.Shutdown
// under traffic. It is rolling-deploy in this process, where the probe job runs, so the
// jobs of a clean handover are judged too (jobs stop before the lease is released).
func handover(h *harness) error {
	if err := h.startBroker(); err != nil {
		return err
	}
	cur, err := h.startInproc("r1", false)
	if err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	from := time.Now()
	rollout := 1
	for n := 0; h.cycles(n, 2); n++ {
		// Long enough serving first that a holder which stopped serving on its own
		// (drop-renewal-reply) leaves a gap serving-gap sees.
		if err := h.sleep(h.between(h.lease, 3*h.lease/2)); err != nil {
			return err
		}
		rollout++
		next, err := h.startInproc(fmt.Sprintf("r%d", rollout), false)
		if err != nil {
			return err
		}
		if err := h.waitFor(5*time.Second, next.nm+" standing by", func() bool { return next.mon.current() == "standby" }); err != nil {
			return err
		}
		if err := h.sleep(h.between(0, h.lease/2)); err != nil {
			return err
		}
		h.handOver(cur.nm, "Shutdown: hand over to %s", next.nm)
		cur.stopped = true
		if err := cur.shutdown(); err != nil {
			h.expect("handed-over", false, "%s: %v", cur.nm, err)
		}
		if err := h.waitFor(5*h.lease, next.nm+" serving", func() bool { return next.mon.current() == "serving" }); err != nil {
			return err
		}
		h.handedOver()
		cur = next
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	to := time.Now()
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.perCycle(h.history(), zeroFailures)
	// A clean handover leaves no engine serving for the moment from the release to
	// the successor's subscriptions: well within a renewal interval.
	h.check(check.ServingGap(h.serving(), from, to, h.lease/4, h.cycleList()))
	h.historyChecks(h.handoverOverlap())
	return nil
}
