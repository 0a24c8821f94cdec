package chaos

import (
	"fmt"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
)

// rollingDeploy: successive rollouts replace each other by SIGTERM handovers.
func rollingDeploy(h *harness) error {
	if err := h.startBroker(); err != nil {
		return err
	}
	want := map[*procMember]int{}
	rollout := 1
	cur, err := h.startProcess("r1")
	if err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	for n := 0; h.cycles(n, 3); n++ {
		if err := h.sleep(h.between(h.lease/4, h.lease)); err != nil {
			return err
		}
		rollout++
		next, err := h.startProcess(fmt.Sprintf("r%d", rollout))
		if err != nil {
			return err
		}
		if err := h.waitFor(5*time.Second, next.nm+" standing by", func() bool { return next.mon.current() == "standby" }); err != nil {
			return err
		}
		if err := h.sleep(h.between(0, h.lease/2)); err != nil {
			return err
		}
		h.handOver(cur.nm, "SIGTERM: hand over to %s", next.nm)
		want[cur] = 0
		if err := cur.p.Terminate(); err != nil {
			return err
		}
		if _, err := cur.wait(drainSeconds*time.Second + 20*time.Second); err != nil {
			return err
		}
		if err := h.waitFor(5*h.lease, next.nm+" serving", func() bool { return next.mon.current() == "serving" }); err != nil {
			return err
		}
		h.handedOver()
		cur = next
	}
	if err := h.sleep(h.lease / 2); err != nil {
		return err
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.fault(cur.nm, "SIGTERM: last engine hands over to nobody")
	want[cur] = 0
	if err := cur.p.Terminate(); err != nil {
		return err
	}
	if _, err := cur.wait(drainSeconds*time.Second + 20*time.Second); err != nil {
		return err
	}
	h.perCycle(h.history(), zeroFailures)
	h.historyChecks(h.handoverOverlap())
	h.exitCodes(want)
	return nil
}

// killHolder: SIGKILL the serving process and start a replacement of the same rollout,
// which watches the silent lease for a period and takes it over.
func killHolder(h *harness) error {
	if err := h.startBroker(); err != nil {
		return err
	}
	want := map[*procMember]int{}
	cur, err := h.startProcess("r1")
	if err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	var faults []check.Fault
	var kills []time.Time
	for n := 0; h.cycles(n, 2); n++ {
		if err := h.sleep(h.between(h.lease/2, 3*h.lease/2)); err != nil {
			return err
		}
		at := h.fault(cur.nm, "SIGKILL")
		want[cur] = -1
		if err := cur.p.Kill(); err != nil {
			return err
		}
		if _, err := cur.wait(10 * time.Second); err != nil {
			return err
		}
		faults = append(faults, check.Fault{Name: "SIGKILL " + cur.nm, Start: at, End: at})
		kills = append(kills, at)
		next, err := h.startProcess("r1")
		if err != nil {
			return err
		}
		if err := h.waitFor(5*h.lease, next.nm+" serving", func() bool { return next.mon.current() == "serving" }); err != nil {
			return err
		}
		if err := h.waitAnswering(next); err != nil {
			return err
		}
		cur = next
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	want[cur] = 0
	if err := cur.p.Terminate(); err != nil {
		return err
	}
	if _, err := cur.wait(drainSeconds*time.Second + 20*time.Second); err != nil {
		return err
	}
	h.answeredAfterTakeover(faults, 2*h.lease+processStart)
	h.takeoversAfterSilence(kills)
	h.historyChecks(0)
	h.exitCodes(want)
	return nil
}

// pauseHolder: SIGSTOP the holder for longer than a lease while a standby takes over,
// then SIGCONT it: it must answer nothing more and exit as lost.
func pauseHolder(h *harness) error {
	if err := h.startBroker(); err != nil {
		return err
	}
	want := map[*procMember]int{}
	rollout := 1
	cur, err := h.startProcess("r1")
	if err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	var pcs []pauseCycle
	var successors []*procMember
	for n := 0; h.cycles(n, 1); n++ {
		// Each cycle pauses the holder that the previous one left serving, with a
		// standby of its own to take over.
		rollout++
		standby, err := h.startProcess(fmt.Sprintf("r%d", rollout))
		if err != nil {
			return err
		}
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		pause := h.between(2*h.lease, 3*h.lease)
		if err := cur.p.Pause(); err != nil {
			return err
		}
		// Recorded once the stop has taken effect: the engine surely answered nothing after.
		stopAt := h.fault(cur.nm, "SIGSTOP for %s", pause.Round(time.Millisecond))
		if err := h.sleep(pause); err != nil {
			return err
		}
		contAt := h.fault(cur.nm, "SIGCONT")
		if err := cur.p.Resume(); err != nil {
			return err
		}
		pcs = append(pcs, pauseCycle{stop: stopAt, cont: contAt, paused: cur.nm})
		successors = append(successors, standby)
		want[cur] = 1
		code, err := cur.wait(5 * h.lease)
		switch {
		case err != nil:
			h.expect("resumed-holder-exits-lost", false, "%s did not exit within %s of SIGCONT: %v", cur.nm, 5*h.lease, err)
			return err
		case code != 1 || !cur.logged("took the engine lease"):
			h.expect("resumed-holder-exits-lost", false, "%s exited %d after SIGCONT; want 1 with the lease lost (log %s):\n%s", cur.nm, code, cur.logPath, tail(cur.logPath, 5))
		default:
			h.expect("resumed-holder-exits-lost", true, "%s exited 1 as lost %s after SIGCONT", cur.nm, cur.p.ExitedAt().Sub(contAt).Round(time.Millisecond))
		}
		if err := h.waitFor(5*h.lease, standby.nm+" serving", func() bool { return standby.mon.current() == "serving" }); err != nil {
			return err
		}
		if err := h.sleep(h.lease); err != nil {
			return err
		}
		cur = standby
	}
	return h.endPauses(cur, want, pcs, successors)
}

// pauseCycle is what one cycle of pause-holder did: when it stopped and resumed the
// holder, and which instance took over.
type pauseCycle struct {
	stop, cont time.Time
	paused     string // the paused engine's name
	successor  string // the instance that took over
}

// pauseVerdicts judges pause-holder's history one cycle at a time: in each cycle
// every call sent from a moment after SIGCONT to the end of the cycle is answered by
// the successor (the calls the next cycle's pause holds up are the next cycle's), the
// successor took over only after a silent lease, and every call clear of the pause and
// its moment is answered. pcs[i] is what cycles[i] did.
func pauseVerdicts(hist []bench.Op, events []check.LeaseEvent, cycles check.Cycles, pcs []pauseCycle, lease time.Duration) []check.Result {
	// "A moment" after the resume: the signal is delivered and the process scheduled.
	moment := lease / 10
	var out []check.Result
	var faults []check.Fault
	calls := cycles.Split(hist)
	for _, pc := range pcs {
		c := cycles.Of(pc.stop)
		out = append(out,
			c.Label(check.AnsweredOnlyBy(calls[max(c.N-1, 0)], pc.cont.Add(moment), c.To, pc.successor)),
			c.Label(check.TakeoverAfterSilence(c.Revisions(events), pc.stop, lease, observerTolerance)))
		faults = append(faults, check.Fault{Name: "SIGSTOP " + pc.paused, Start: pc.stop, End: pc.cont, Until: c.To})
	}
	out = append(out, cycles.Each(hist, func(_ check.Cycle, calls []bench.Op) check.Result {
		return check.AnsweredAfterTakeover(calls, faults, moment)
	})...)
	return out
}

// endPauses ends a scenario of paused holders (pause-holder, zombie-write): the traffic
// stops, the last holder, cur, hands over to nobody, and the cycles are judged: each
// pause of pcs with its successor, the history, and the exit codes want.
func (h *harness) endPauses(cur *procMember, want map[*procMember]int, pcs []pauseCycle, successors []*procMember) error {
	if err := h.stopTraffic(); err != nil {
		return err
	}
	want[cur] = 0
	if err := cur.p.Terminate(); err != nil {
		return err
	}
	if _, err := cur.wait(drainSeconds*time.Second + 20*time.Second); err != nil {
		return err
	}
	for i, m := range successors {
		pcs[i].successor = m.id()
	}
	h.check(pauseVerdicts(h.history(), h.leaseEvents(), h.cycleList(), pcs, h.lease)...)
	h.historyChecks(0)
	h.exitCodes(want)
	return nil
}
