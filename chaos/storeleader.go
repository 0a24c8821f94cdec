package chaos

import (
	"sync"
	"time"

	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/nats-io/nats-server/v2/server"
)

// leaderWatch follows, on a cluster, which node leads the lease stream. While no node
// does, no engine can renew or take the lease: the store itself is down, whatever the
// engines do. The stretches without a leader are the store's own unavailability, which
// serving-gap on a cluster leaves out and the report gives as a figure.
//
// It asks each running node every 5 ms. A node is left out from just before the
// scenario stops it until it has started again (down): its server's lock is held the
// whole time, and a stopping leader serves no writes.
type leaderWatch struct {
	h    *harness
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	down    map[int]bool
	leader  int       // -1: none
	since   time.Time // when the stretch without a leader began (leader -1)
	outages []check.Interval
}

// leaderPoll is how often the watch asks the nodes.
const leaderPoll = 5 * time.Millisecond

// watchLeader starts the watch; stopWatch (teardown) ends it.
func (h *harness) watchLeader() {
	w := &leaderWatch{h: h, stop: make(chan struct{}), done: make(chan struct{}), down: map[int]bool{}, leader: -2}
	w.poll()
	h.mu.Lock()
	h.leaders = w
	h.mu.Unlock()
	go w.run()
}

func (w *leaderWatch) run() {
	defer close(w.done)
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			w.poll()
		}
	}
}

// poll asks every node not down whether it leads, and records a change.
func (w *leaderWatch) poll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	leader := -1
	for i, n := range w.h.cluster.Nodes {
		if w.down[i] {
			continue
		}
		if r := n.Raw(); r != nil && r.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, leaseStream) {
			leader = i
			break
		}
	}
	w.seeLocked(leader, time.Now())
}

// seeLocked records leader as the lease stream's leader at now.
func (w *leaderWatch) seeLocked(leader int, now time.Time) {
	if leader == w.leader {
		return
	}
	was := w.leader
	w.leader = leader
	switch {
	case leader < 0:
		w.since = now
		w.h.eventAt(now, report.KindStore, leaseStream, "no leader")
	case was == -1:
		w.outages = append(w.outages, check.Interval{Instance: leaseStream, From: w.since, To: now})
		w.h.eventAt(now, report.KindStore, leaseStream, "led by %s after %s without a leader",
			w.h.cluster.Nodes[leader].Name(), now.Sub(w.since).Round(time.Millisecond))
	default:
		w.h.eventAt(now, report.KindStore, leaseStream, "led by %s", w.h.cluster.Nodes[leader].Name())
	}
}

// stopping leaves node idx out from now: it is about to stop. A stopping leader serves
// no more writes, so if it led, the stretch without a leader begins now, unless a node
// still running already leads.
func (w *leaderWatch) stopping(idx int) {
	w.mu.Lock()
	w.down[idx] = true
	w.mu.Unlock()
	w.poll()
}

// started asks node idx again: it has started.
func (w *leaderWatch) started(idx int) {
	w.mu.Lock()
	delete(w.down, idx)
	w.mu.Unlock()
	w.poll()
}

// without are the stretches without a leader until now, the one still open ending now.
func (w *leaderWatch) without() []check.Interval {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]check.Interval(nil), w.outages...)
	if w.leader == -1 {
		out = append(out, check.Interval{Instance: leaseStream, From: w.since, To: time.Now()})
	}
	return out
}

func (w *leaderWatch) end() {
	close(w.stop)
	<-w.done
}

// storeOutages are the stretches the lease stream had no leader; none without a
// cluster.
func (h *harness) storeOutages() []check.Interval {
	h.mu.Lock()
	w := h.leaders
	h.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.without()
}
