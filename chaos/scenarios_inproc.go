package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/fault"
)

// holderAndStandby starts the broker, a serving engine (rollout r1) and a standby (r2),
// each through a proxy of its own when proxied, then the traffic.
func (h *harness) holderAndStandby(proxied bool) (cur, standby *inproc, err error) {
	if err := h.startBroker(); err != nil {
		return nil, nil, err
	}
	if cur, err = h.startInproc("r1", proxied); err != nil {
		return nil, nil, err
	}
	if standby, err = h.startInproc("r2", proxied); err != nil {
		return nil, nil, err
	}
	return cur, standby, h.startTraffic()
}

// partition: every engine reaches the broker through a proxy of its own; the holder's
// is slowed (it must keep the lease), then cut (it must fence within lease/2, and the
// standby take over only after a full lease).
func partition(h *harness) error {
	cur, standby, err := h.holderAndStandby(true)
	if err != nil {
		return err
	}
	rollout := 2
	var faults []check.Fault
	for n := 0; h.cycles(n, 1); n++ {
		if n > 0 {
			rollout++
			if standby, err = h.startInproc(fmt.Sprintf("r%d", rollout), true); err != nil {
				return err
			}
		}
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		// Slower than usual but well within a renewal's lease/4: no handover.
		delay := h.between(h.lease/40, h.lease/20)
		slowAt := h.fault(cur.nm, "proxy delays every byte by %s", delay.Round(time.Millisecond))
		cur.proxy.Slow(delay)
		if err := h.sleep(h.lease); err != nil {
			return err
		}
		cur.proxy.Slow(0)
		fastAt := h.fault(cur.nm, "proxy delay removed")
		h.checkNow(h.holderKept("holder-kept-when-slow", slowAt, fastAt))
		if err := h.sleep(h.lease / 4); err != nil {
			return err
		}
		cut := h.between(2*h.lease, 3*h.lease)
		cutAt := h.fault(cur.nm, "proxy cut for %s (connections open, bytes held)", cut.Round(time.Millisecond))
		cur.proxy.Cut()
		if err := h.sleep(cut); err != nil {
			return err
		}
		cur.proxy.Restore()
		restoreAt := h.fault(cur.nm, "proxy restored")
		faults = append(faults, check.Fault{Name: "cut " + cur.nm, Start: cutAt, End: restoreAt})
		h.checkNow(check.FencedWithin(cutAt, cur.mon.entered("fenced", cutAt), h.lease/2+h.lease/5))
		h.waitTakeoverObserved(cutAt)
		h.checkNow(check.TakeoverAfterSilence(h.leaseEvents(), cutAt, h.lease, observerTolerance))
		if err := h.cutHolderEnds(cur, standby); err != nil {
			return err
		}
		cur = standby
	}
	return h.endCuts(faults)
}

// fleet starts in-process engines with successive rollouts and keeps them.
type fleet struct {
	h       *harness
	next    int // the next rollout number
	engines []*inproc
}

// alive counts the engines that have not ended.
func (f *fleet) alive() int {
	n := 0
	for _, m := range f.engines {
		if m.mon.current() != stateEnded {
			n++
		}
	}
	return n
}

// anyServing reports whether one of the engines serves.
func (f *fleet) anyServing() bool {
	for _, m := range f.engines {
		if m.mon.current() == "serving" {
			return true
		}
	}
	return false
}

func (f *fleet) start() error {
	m, err := f.h.startInproc(fmt.Sprintf("r%d", f.next), false)
	f.next++
	if m != nil {
		f.engines = append(f.engines, m)
	}
	return err
}

// restartWindow is how long after the broker is back calls may still fail: the
// engines reconnect (250 ms plus jitter), resubscribe, and a fenced holder renews.
func restartWindow(lease time.Duration) time.Duration { return 2 * lease }

// brokerRestart: the broker goes away and comes back on the same port and store.
func brokerRestart(h *harness) error {
	if err := h.startBroker(); err != nil {
		return err
	}
	f := &fleet{h: h, next: 1}
	if err := f.start(); err != nil {
		return err
	}
	if err := f.start(); err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	var faults []check.Fault
	for n := 0; h.cycles(n, 1); n++ {
		// Keep a standby: an engine that lost the lease during an outage has ended.
		if n > 0 && f.alive() < 2 {
			if err := f.start(); err != nil {
				return err
			}
		}
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		down := h.between(h.lease/10, h.lease/2)
		stopAt := h.fault("broker", "stopped for %s", down.Round(time.Millisecond))
		h.srv.Stop()
		if err := h.sleep(down); err != nil {
			return err
		}
		if err := h.srv.Start(); err != nil {
			return err
		}
		upAt := h.fault("broker", "started again on the same port and store")
		faults = append(faults, check.Fault{Name: "broker restart", Start: stopAt, End: upAt})
		if err := h.waitFor(10*h.lease, "an engine serving after the restart", f.anyServing); err != nil {
			return err
		}
		// Past the takeover window, so calls after it show the engines came back.
		if err := h.sleep(restartWindow(h.lease) + h.lease); err != nil {
			return err
		}
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.answeredAfterTakeover(faults, restartWindow(h.lease))
	h.historyChecks(0)
	return nil
}

// actorTargets are the actors of a serving engine the scenario kills; the standby's
// own are contenderTargets.
var (
	actorTargets     = []string{"ownership", "renewer", "fencer", "primary:keyvalue", "primary:object_storage", "transfer:object_storage", "overflow", "root", "jobs", "session"}
	contenderTargets = []string{"contender", "ownership"}
)

// actorKills: every actor panics in turn under traffic; nothing may fail and the
// holder must keep the lease.
func actorKills(h *harness) error {
	if err := h.startBroker(); err != nil {
		return err
	}
	holder, err := h.startInproc("r1", false)
	if err != nil {
		return err
	}
	standby, err := h.startInproc("r2", false)
	if err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	from := time.Now()
	type kill struct {
		m      *inproc
		target string
	}
	var plan []kill
	for _, t := range actorTargets {
		plan = append(plan, kill{holder, t})
	}
	for _, t := range contenderTargets {
		plan = append(plan, kill{standby, t})
	}
	for n := 0; h.cycles(n, 1); n++ {
		var missing []string
		h.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
		for _, k := range plan {
			if err := h.sleep(h.between(h.lease/4, h.lease/2)); err != nil {
				return err
			}
			if k.target == "session" {
				if err := h.killSession(k.m); err != nil {
					h.expect("transfer-session-kill", false, "%v", err)
				}
				continue
			}
			h.fault(k.m.nm, "panic injected into %s", k.target)
			if err := k.m.eng.InjectPanic(k.target); err != nil {
				missing = append(missing, fmt.Sprintf("%s: %v", k.m.nm, err))
			}
		}
		slices.Sort(missing)
		h.checkNow(check.Result{Name: "actor-targets", Passed: len(missing) == 0, Count: len(missing), Details: missing,
			Summary: fmt.Sprintf("%d actors targeted, %d missing", len(plan), len(missing))})
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	to := time.Now()
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.perCycle(h.history(), zeroFailures)
	for _, c := range h.cycleList() {
		// The first cycle from the first kill's schedule, the last to the end.
		f, t := c.From, c.To
		if f.IsZero() {
			f = from
		}
		if t.IsZero() {
			t = to
		}
		h.check(c.Label(h.holderKept("holder-kept", f, t)))
	}
	h.historyChecks(0)
	return nil
}

// foreignValue: a value no engine wrote goes into the lease key.
func foreignValue(h *harness) error {
	cur, standby, err := h.holderAndStandby(false)
	if err != nil {
		return err
	}
	rollout := 2
	var faults []check.Fault
	for n := 0; h.cycles(n, 1); n++ {
		if n > 0 {
			rollout++
			if standby, err = h.startInproc(fmt.Sprintf("r%d", rollout), false); err != nil {
				return err
			}
		}
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		at := h.fault("lease", "foreign value written: %s", fault.ForeignValue)
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		_, err := fault.PutLease(ctx, h.nc, h.replicas, fault.ForeignValue)
		cancel()
		if err != nil {
			return err
		}
		faults = append(faults, check.Fault{Name: "foreign lease value", Start: at, End: at})
		old := cur
		if err := h.waitFor(3*h.lease, old.nm+" ending as lost", func() bool { return old.mon.current() == stateEnded }); err != nil {
			h.expect("holder-ends-lost", false, "%v", err)
		} else {
			h.expect("holder-ends-lost", old.lost(), "%s ended: %s", old.nm, old.info().End)
		}
		if err := h.waitFor(5*h.lease, standby.nm+" serving", func() bool { return standby.mon.current() == "serving" }); err != nil {
			return err
		}
		h.waitTakeoverObserved(at)
		h.checkNow(check.TakeoverAfterSilence(h.leaseEvents(), at, h.lease, observerTolerance))
		cur = standby
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.answeredAfterTakeover(faults, 2*h.lease)
	h.historyChecks(0)
	return nil
}

// clusterNodeLoss: each node of a 3-node cluster is lost in turn, the lease stream's
// leader first; R3 buckets keep the lease and the data. The harness follows the leader
// of each stream (storeleader.go): serving-gap judges the time without a serving
// engine while every one had a leader.
func clusterNodeLoss(h *harness) error {
	if err := h.startCluster(); err != nil {
		return err
	}
	f := &fleet{h: h, next: 1}
	if err := f.start(); err != nil {
		return err
	}
	if err := f.start(); err != nil {
		return err
	}
	if err := h.watchLeaders(); err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	from := time.Now()
	faults, err := loseNodes(h, f)
	if err == nil {
		err = h.sleep(h.lease)
	}
	// While a stream has no leader no engine can serve: without the lease's none can
	// renew or take the lease, without a bucket's none can adopt its epoch there. The
	// store's unavailability (the broker's raft election, seconds when a stopped leader
	// hands its leadership to no one) is left out and reported; what remains is the
	// engines'. It is judged even when the schedule broke down: an engine that never
	// served again is the gap it left.
	h.check(check.ServingGapWhileStoreUp(h.serving(), h.storeOutages(), from, time.Now(), h.lease, h.cycleList()))
	if err != nil {
		return err
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.answeredAfterTakeover(faults, 2*h.lease)
	h.historyChecks(0)
	return nil
}

// loseNodes is cluster-node-loss's schedule: a cycle stops a node, starts it again
// once it has been gone for 2-3 leases, and ends once the cluster is whole, the lease
// stream caught up and an engine serves.
func loseNodes(h *harness, f *fleet) ([]check.Fault, error) {
	var faults []check.Fault
	var order []int
	for n := 0; h.cycles(n, 3); n++ {
		if n > 0 && f.alive() < 2 {
			if err := f.start(); err != nil {
				return faults, err
			}
		}
		if len(order) == 0 {
			// A round: the lease stream's leader first, then the others in seeded order.
			leader := h.cluster.StreamLeader(leaseStream)
			if leader < 0 {
				leader = 0
			}
			others := []int{}
			for i := range h.cluster.Nodes {
				if i != leader {
					others = append(others, i)
				}
			}
			h.rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
			order = append([]int{leader}, others...)
		}
		idx := order[0]
		order = order[1:]
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return faults, err
		}
		node := h.cluster.Nodes[idx]
		what := ""
		if h.cluster.StreamLeader(leaseStream) == idx {
			what = " (leader of " + leaseStream + ")"
		}
		h.leaders.stopping(idx)
		stopAt := h.fault(node.Name(), "node stopped%s", what)
		node.Stop()
		if err := h.sleep(h.between(2*h.lease, 3*h.lease)); err != nil {
			return faults, err
		}
		if err := node.Start(); err != nil {
			return faults, err
		}
		h.leaders.started(idx)
		h.logNode(idx)
		ctx, cancel := context.WithTimeout(h.ctx, 60*time.Second)
		err := h.cluster.WaitReady(ctx)
		cancel()
		if err != nil {
			return faults, err
		}
		if err := h.waitFor(30*time.Second, "the lease stream caught up on "+node.Name(), func() bool { return h.cluster.StreamCurrent(leaseStream) }); err != nil {
			return faults, err
		}
		upAt := h.fault(node.Name(), "node back and caught up")
		faults = append(faults, check.Fault{Name: "lost " + node.Name(), Start: stopAt, End: upAt})
		// The cycle ends once an engine serves again: its calls' window closes there.
		if err := h.waitFor(10*h.lease, "an engine serving after "+node.Name()+" came back", f.anyServing); err != nil {
			return faults, err
		}
	}
	return faults, nil
}

// cutHolderEnds waits, after a cut of old's lease connection, for old to end as lost
// (judged as cut-holder-ends-lost) and for standby to serve (the run breaks down if it
// does not).
func (h *harness) cutHolderEnds(old, standby *inproc) error {
	if err := h.waitFor(5*h.lease, old.nm+" ending as lost", func() bool { return old.mon.current() == stateEnded }); err != nil {
		h.expect("cut-holder-ends-lost", false, "%s", err)
	} else {
		h.expect("cut-holder-ends-lost", old.lost(), "%s ended: %s", old.nm, old.info().End)
	}
	return h.waitFor(5*h.lease, standby.nm+" serving", func() bool { return standby.mon.current() == "serving" })
}

// endCuts ends a scenario of cut holders (partition, clock-skew): a lease more of
// traffic, then every call clear of faults is judged, and the history.
func (h *harness) endCuts(faults []check.Fault) error {
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.answeredAfterTakeover(faults, h.lease)
	h.historyChecks(0)
	return nil
}
