package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
)

// discoveryScenario: engine processes that host the module registry replace each other
// by SIGTERM handovers (even cycles) and are SIGKILLed and replaced (odd cycles), under
// the keyvalue traffic and the module traffic (modules.go). The registry lives in its
// bucket, so every engine that takes over must serve it as it was: no instance whose
// renewal is still within its lease may be missing from a read, no register may show as
// two instances, and the discovery calls fail only in a kill's takeover window.
func discoveryScenario(h *harness) error {
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
	if err := h.startModules(); err != nil {
		return err
	}
	var faults []check.Fault
	var kills []time.Time
	for n := 0; h.cycles(n, 2); n++ {
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		var next *procMember
		if n%2 == 0 {
			rollout++
			if next, err = h.startProcess(fmt.Sprintf("r%d", rollout)); err != nil {
				return err
			}
			if err := h.waitFor(5*time.Second, next.nm+" standing by", func() bool { return next.mon.current() == "standby" }); err != nil {
				return err
			}
			if err := h.sleep(h.between(0, h.lease/2)); err != nil {
				return err
			}
			h.fault(cur.nm, "SIGTERM: hand over to %s", next.nm)
			want[cur] = 0
			if err := cur.p.Terminate(); err != nil {
				return err
			}
			if _, err := cur.wait(drainSeconds*time.Second + 20*time.Second); err != nil {
				return err
			}
		} else {
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
			if next, err = h.startProcess(fmt.Sprintf("r%d", rollout)); err != nil {
				return err
			}
		}
		if err := h.waitFor(5*h.lease, next.nm+" serving", func() bool { return next.mon.current() == "serving" }); err != nil {
			return err
		}
		// The cycle ends once the successor has answered both traffics.
		served := time.Now()
		if err := h.waitAnswering(next); err != nil {
			return err
		}
		if err := h.waitFor(2*h.discoveryLease(), next.nm+" answering module reads", func() bool { return h.modules.answeredSince(served) }); err != nil {
			return err
		}
		cur = next
	}
	if err := h.sleep(h.lease / 2); err != nil {
		return err
	}
	if err := h.endModules(); err != nil {
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
	window := 2*h.lease + processStart
	h.answeredAfterTakeover(faults, window)
	calls, ops := h.modules.history()
	bounded := h.bounded(faults)
	h.perCycle(ops, func(_ check.Cycle, ops []bench.Op) check.Result {
		r := check.AnsweredAfterTakeover(ops, bounded, window)
		r.Name = "discovery-answered"
		return r
	})
	h.check(check.RegistryKept(calls, h.modules.instances, h.discoveryLease(), observerTolerance))
	h.takeoversAfterSilence(kills)
	h.historyChecks(h.handoverOverlap())
	h.exitCodes(want)
	return nil
}

// endModules stops the readers, reads the registry once more (every instance once:
// a read the registry-kept check judges too), and unregisters every instance, after
// which the registry must hold none of them.
func (h *harness) endModules() error {
	mt := h.modules
	mt.stopReaders()
	seen, err := mt.list(h.ctx)
	if err != nil {
		return fmt.Errorf("list the modules at the end: %w", err)
	}
	ids := make([]string, 0, len(mt.instances))
	for id := range mt.instances {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	h.expect("registry-complete-at-end", slices.Equal(seen, ids), "the registry lists %d instance(s) of the %d registered%s",
		len(seen), len(ids), diffIDs(ids, seen))
	ended, err := mt.close()
	h.expect("sessions-renewed-to-the-end", len(ended) == 0 && err == nil, "%d session(s) whose renewals ended %v; unregister: %v", len(ended), ended, err)
	left, err := mt.list(h.ctx)
	if err != nil {
		return fmt.Errorf("list the modules after unregistering: %w", err)
	}
	h.expect("unregistered-at-close", len(left) == 0, "%d instance(s) left after every session closed: %v", len(left), left)
	return nil
}

// diffIDs says which of want are missing from got and which of got are extra.
func diffIDs(want, got []string) string {
	var missing, extra []string
	for _, id := range want {
		if !slices.Contains(got, id) {
			missing = append(missing, id)
		}
	}
	for _, id := range got {
		if !slices.Contains(want, id) {
			extra = append(extra, id)
		}
	}
	if len(missing)+len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf(" (missing %s; extra or repeated %s)", strings.Join(missing, ","), strings.Join(extra, ","))
}
