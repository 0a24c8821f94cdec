package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/fault"
)

// Allowances the checkers judge with (docs/chaos.md explains each).
const (
	// observerTolerance is how much earlier or later the harness's watch may see a lease
	// revision than a contender does.
	observerTolerance = 50 * time.Millisecond
	// linearizabilityBudget bounds the porcupine search over all keys, plus a second
	// per 10,000 operations for long soaks.
	linearizabilityBudget = 60 * time.Second
	// processStart is what a replacement process adds to a takeover: exec, connect,
	// open the buckets.
	processStart = time.Second
)

// handoverOverlap is the designed overlap of a clean handover: the old engine releases
// the lease and then unsubscribes, so a successor quick enough may subscribe first.
// The release-to-unsubscribe step is one actor message and a flush; a lease/4 (the
// renewal interval) bounds it generously.
func (h *harness) handoverOverlap() time.Duration { return h.lease / 4 }

// historyChecks are the checks every scenario runs over its whole history.
func (h *harness) historyChecks(overlap time.Duration) {
	hist := h.history()
	budget := linearizabilityBudget + time.Duration(len(hist)/10000)*time.Second
	h.check(check.NoOverlap(hist, overlap), check.Linearizable(hist, budget))
	if jobs := h.jobRuns(); len(jobs) > 0 {
		// A handover stops the jobs before it releases the lease, and a fence stops
		// them at once: no overlap at all is allowed.
		r := check.NoOverlap(jobs, 0)
		r.Name = "jobs-no-overlap"
		r.Summary = fmt.Sprintf("%d probe job runs: %s", len(jobs), r.Summary)
		h.check(r)
	}
}

// exitCodes checks that every process ended as the scenario expects: want maps a
// process to its exit code, -1 for a process the scenario killed.
func (h *harness) exitCodes(want map[*procMember]int) {
	var bad []string
	n := 0
	for _, m := range h.allMembers() {
		p, ok := m.(*procMember)
		if !ok {
			continue
		}
		code, ok := want[p]
		if !ok {
			continue
		}
		n++
		if !p.p.Exited() || p.p.ExitCode() != code {
			bad = append(bad, fmt.Sprintf("%s: %s, want exit %d", p.nm, p.end(), code))
		}
	}
	r := check.Result{Name: "exit-codes", Passed: len(bad) == 0, Count: len(bad), Details: bad,
		Summary: fmt.Sprintf("%d process(es) ended as expected", n)}
	if len(bad) > 0 {
		r.Summary = fmt.Sprintf("%d of %d process(es) ended otherwise than expected", len(bad), n)
	}
	h.check(r)
}

// invokedBefore keeps the calls invoked before t (every call when t is zero).
func invokedBefore(hist []bench.Op, t time.Time) []bench.Op {
	if t.IsZero() {
		return hist
	}
	var out []bench.Op
	for _, op := range hist {
		if op.Invoke.Before(t) {
			out = append(out, op)
		}
	}
	return out
}

// holderKept checks that the lease did not change holder within [from, to].
func (h *harness) holderKept(name string, from, to time.Time) {
	holder := h.holderAt(from)
	var changes []string
	for _, e := range h.leaseEvents() {
		if e.At.Before(from) || e.At.After(to) {
			continue
		}
		if e.Holder != holder {
			changes = append(changes, fmt.Sprintf("at %s the lease went from %s to %s (revision %d)",
				e.At.Format("15:04:05.000"), h.describeHolder(holder), h.describeHolder(e.Holder), e.Revision))
			holder = e.Holder
		}
	}
	r := check.Result{Name: name, Passed: len(changes) == 0, Count: len(changes), Details: changes,
		Summary: fmt.Sprintf("%s kept the lease for %s", h.describeHolder(h.holderAt(from)), to.Sub(from).Round(time.Millisecond))}
	if len(changes) > 0 {
		r.Summary = fmt.Sprintf("the lease changed holder %d time(s)", len(changes))
	}
	h.check(r)
}

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
		h.fault(cur.nm, "SIGTERM: hand over to %s", next.nm)
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
	h.check(check.ZeroFailures(h.history()))
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
	hist := h.history()
	h.check(check.AnsweredAfterTakeover(hist, faults, 2*h.lease+processStart))
	for _, k := range kills {
		h.check(check.TakeoverAfterSilence(h.leaseEvents(), k, h.lease, observerTolerance))
	}
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
	rollout++
	standby, err := h.startProcess(fmt.Sprintf("r%d", rollout))
	if err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	type resumed struct {
		at, until time.Time
		by        *procMember
	}
	var faults []check.Fault
	var resumes []resumed
	var pauses []time.Time
	for n := 0; h.cycles(n, 1); n++ {
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		pause := h.between(2*h.lease, 3*h.lease)
		stopAt := h.fault(cur.nm, "SIGSTOP for %s", pause)
		if n > 0 {
			resumes[n-1].until = stopAt
		}
		pauses = append(pauses, stopAt)
		if err := cur.p.Pause(); err != nil {
			return err
		}
		if err := h.sleep(pause); err != nil {
			return err
		}
		contAt := h.fault(cur.nm, "SIGCONT")
		if err := cur.p.Resume(); err != nil {
			return err
		}
		faults = append(faults, check.Fault{Name: "SIGSTOP " + cur.nm, Start: stopAt, End: contAt})
		resumes = append(resumes, resumed{at: contAt, by: standby})
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
		if h.cycles(n+1, 1) {
			rollout++
			if standby, err = h.startProcess(fmt.Sprintf("r%d", rollout)); err != nil {
				return err
			}
		}
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
	hist := h.history()
	// "A moment" after the resume: the signal is delivered and the process scheduled.
	moment := h.lease / 10
	for _, r := range resumes {
		h.check(check.AnsweredOnlyBy(invokedBefore(hist, r.until), r.at.Add(moment), r.by.id()))
	}
	for _, p := range pauses {
		h.check(check.TakeoverAfterSilence(h.leaseEvents(), p, h.lease, observerTolerance))
	}
	h.check(check.AnsweredAfterTakeover(hist, faults, moment))
	h.historyChecks(0)
	h.exitCodes(want)
	return nil
}

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
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		// Slower than usual but well within a renewal's lease/4: no handover.
		delay := h.between(h.lease/40, h.lease/20)
		slowAt := h.fault(cur.nm, "proxy delays every byte by %s", delay)
		cur.proxy.Slow(delay)
		if err := h.sleep(h.lease); err != nil {
			return err
		}
		cur.proxy.Slow(0)
		fastAt := h.fault(cur.nm, "proxy delay removed")
		h.holderKept("holder-kept-when-slow", slowAt, fastAt)
		if err := h.sleep(h.lease / 4); err != nil {
			return err
		}
		cut := h.between(2*h.lease, 3*h.lease)
		cutAt := h.fault(cur.nm, "proxy cut for %s (connections open, bytes held)", cut)
		cur.proxy.Cut()
		if err := h.sleep(cut); err != nil {
			return err
		}
		cur.proxy.Restore()
		restoreAt := h.fault(cur.nm, "proxy restored")
		faults = append(faults, check.Fault{Name: "cut " + cur.nm, Start: cutAt, End: restoreAt})
		h.check(check.FencedWithin(cutAt, cur.mon.entered("fenced", cutAt), h.lease/2+h.lease/5))
		h.waitTakeoverObserved(cutAt)
		h.check(check.TakeoverAfterSilence(h.leaseEvents(), cutAt, h.lease, observerTolerance))
		old := cur
		if err := h.waitFor(5*h.lease, old.nm+" ending as lost", func() bool { return old.mon.current() == stateEnded }); err != nil {
			h.expect("cut-holder-ends-lost", false, "%s", err)
		} else {
			h.expect("cut-holder-ends-lost", old.lost(), "%s ended: %s", old.nm, old.info().End)
		}
		if err := h.waitFor(5*h.lease, standby.nm+" serving", func() bool { return standby.mon.current() == "serving" }); err != nil {
			return err
		}
		cur = standby
		if h.cycles(n+1, 1) {
			rollout++
			if standby, err = h.startInproc(fmt.Sprintf("r%d", rollout), true); err != nil {
				return err
			}
		}
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.check(check.AnsweredAfterTakeover(h.history(), faults, h.lease))
	h.historyChecks(0)
	return nil
}

// fleet starts in-process engines with successive rollouts and keeps them.
type fleet struct {
	h       *harness
	next    int // the next rollout number
	engines []*inproc
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
	anyServing := func() bool {
		for _, m := range f.engines {
			if m.mon.current() == "serving" {
				return true
			}
		}
		return false
	}
	var faults []check.Fault
	for n := 0; h.cycles(n, 1); n++ {
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		down := h.between(h.lease/10, h.lease/2)
		stopAt := h.fault("broker", "stopped for %s", down)
		h.srv.Stop()
		if err := h.sleep(down); err != nil {
			return err
		}
		if err := h.srv.Start(); err != nil {
			return err
		}
		upAt := h.fault("broker", "started again on the same port and store")
		faults = append(faults, check.Fault{Name: "broker restart", Start: stopAt, End: upAt})
		if err := h.waitFor(10*h.lease, "an engine serving after the restart", anyServing); err != nil {
			return err
		}
		// Past the takeover window, so calls after it show the engines came back.
		if err := h.sleep(restartWindow(h.lease) + h.lease); err != nil {
			return err
		}
		// Keep a standby: an engine that lost the lease during the outage has ended.
		alive := 0
		for _, m := range f.engines {
			if m.mon.current() != stateEnded {
				alive++
			}
		}
		if alive < 2 && h.cycles(n+1, 1) {
			if err := f.start(); err != nil {
				return err
			}
		}
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.check(check.AnsweredAfterTakeover(h.history(), faults, restartWindow(h.lease)))
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
	var missing []string
	for n := 0; h.cycles(n, 1); n++ {
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
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	to := time.Now()
	if err := h.stopTraffic(); err != nil {
		return err
	}
	slices.Sort(missing)
	h.check(check.Result{Name: "actor-targets", Passed: len(missing) == 0, Count: len(missing), Details: missing,
		Summary: fmt.Sprintf("%d actors targeted, %d missing", len(plan), len(missing))})
	h.check(check.ZeroFailures(h.history()))
	h.holderKept("holder-kept", from, to)
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
		h.check(check.TakeoverAfterSilence(h.leaseEvents(), at, h.lease, observerTolerance))
		cur = standby
		if h.cycles(n+1, 1) {
			rollout++
			if standby, err = h.startInproc(fmt.Sprintf("r%d", rollout), false); err != nil {
				return err
			}
		}
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.check(check.AnsweredAfterTakeover(h.history(), faults, 2*h.lease))
	h.historyChecks(0)
	return nil
}

// clusterNodeLoss: each node of a 3-node cluster is lost in turn, the lease stream's
// leader first; R3 buckets keep the lease and the data.
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
	if err := h.startTraffic(); err != nil {
		return err
	}
	from := time.Now()
	var faults []check.Fault
	var order []int
	for n := 0; h.cycles(n, 3); n++ {
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
			return err
		}
		node := h.cluster.Nodes[idx]
		what := ""
		if h.cluster.StreamLeader(leaseStream) == idx {
			what = " (leader of " + leaseStream + ")"
		}
		stopAt := h.fault(node.Name(), "node stopped%s", what)
		node.Stop()
		if err := h.sleep(h.between(2*h.lease, 3*h.lease)); err != nil {
			return err
		}
		if err := node.Start(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(h.ctx, 60*time.Second)
		err := h.cluster.WaitReady(ctx)
		cancel()
		if err != nil {
			return err
		}
		if err := h.waitFor(30*time.Second, "the lease stream caught up on "+node.Name(), func() bool { return h.cluster.StreamCurrent(leaseStream) }); err != nil {
			return err
		}
		upAt := h.fault(node.Name(), "node back and caught up")
		faults = append(faults, check.Fault{Name: "lost " + node.Name(), Start: stopAt, End: upAt})
		alive := 0
		for _, m := range f.engines {
			if m.mon.current() != stateEnded {
				alive++
			}
		}
		if alive < 2 && h.cycles(n+1, 3) {
			if err := f.start(); err != nil {
				return err
			}
		}
	}
	if err := h.sleep(h.lease); err != nil {
		return err
	}
	to := time.Now()
	if err := h.stopTraffic(); err != nil {
		return err
	}
	h.check(check.ServingGap(h.serving(), from, to, h.lease))
	h.check(check.AnsweredAfterTakeover(h.history(), faults, 2*h.lease))
	h.historyChecks(0)
	return nil
}
