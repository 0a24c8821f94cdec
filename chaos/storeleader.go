package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// leaderWatch follows, on a cluster, which node leads each stream the engines keep
// their state in: the lease's, the keyvalue bucket's, the object store's. While a
// stream has no leader nothing can write it: without the lease's no engine can renew
// or take the lease, without a data bucket's no engine can adopt its epoch there, which
// it must before it serves, nor answer the calls that read or write it. The stretches
// without a leader are the store's own unavailability, which serving-gap on a cluster
// leaves out and the report gives as a figure.
//
// It asks each running node every 5 ms. A node is left out from just before the
// scenario stops it until it has started again (down): its server's lock is held the
// whole time, and a stopping leader serves no more writes.
type leaderWatch struct {
	h    *harness
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	down    map[int]bool
	streams []*streamLeader
}

// streamLeader is what the watch knows of one stream.
type streamLeader struct {
	name    string
	leader  int       // -1: none; -2: not asked yet
	since   time.Time // when the stretch without a leader began (leader -1)
	outages []check.Interval
}

// leaderPoll is how often the watch asks the nodes.
const leaderPoll = 5 * time.Millisecond

// watchLeaders starts the watch of the account's streams (the lease stream first),
// once the engines have made them; teardown ends it.
func (h *harness) watchLeaders() error {
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	js, err := jetstream.New(h.nc)
	if err != nil {
		return fmt.Errorf("list the streams to follow their leaders: %w", err)
	}
	names := []string{leaseStream}
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list the streams to follow their leaders: %w", err)
	}
	w := &leaderWatch{h: h, stop: make(chan struct{}), done: make(chan struct{}), down: map[int]bool{}}
	for _, name := range names {
		w.streams = append(w.streams, &streamLeader{name: name, leader: -2})
	}
	w.poll()
	h.mu.Lock()
	h.leaders = w
	h.mu.Unlock()
	go w.run()
	return nil
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

// poll asks every node not down which streams it leads, and records the changes.
func (w *leaderWatch) poll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var running []*server.Server
	idx := map[*server.Server]int{}
	for i, n := range w.h.cluster.Nodes {
		if w.down[i] {
			continue
		}
		if r := n.Raw(); r != nil {
			running = append(running, r)
			idx[r] = i
		}
	}
	now := time.Now()
	for _, s := range w.streams {
		leader := -1
		for _, r := range running {
			if r.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, s.name) {
				leader = idx[r]
				break
			}
		}
		w.seeLocked(s, leader, now)
	}
}

// seeLocked records leader as s's leader at now.
func (w *leaderWatch) seeLocked(s *streamLeader, leader int, now time.Time) {
	if leader == s.leader {
		return
	}
	was := s.leader
	s.leader = leader
	switch {
	case leader < 0:
		s.since = now
		w.h.eventAt(now, report.KindStore, s.name, "no leader")
	case was == -1:
		s.outages = append(s.outages, check.Interval{Instance: s.name, From: s.since, To: now})
		w.h.eventAt(now, report.KindStore, s.name, "led by %s after %s without a leader",
			w.h.cluster.Nodes[leader].Name(), now.Sub(s.since).Round(time.Millisecond))
	default:
		w.h.eventAt(now, report.KindStore, s.name, "led by %s", w.h.cluster.Nodes[leader].Name())
	}
}

// stopping leaves node idx out from now: it is about to stop. A stopping leader serves
// no more writes, so a stream it led has none from now, unless a node still running
// already leads it.
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

// without are the stretches a stream had no leader until now, the ones still open
// ending now, in the order of the streams.
func (w *leaderWatch) without() []check.Interval {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []check.Interval
	for _, s := range w.streams {
		out = append(out, s.outages...)
		if s.leader == -1 {
			out = append(out, check.Interval{Instance: s.name, From: s.since, To: time.Now()})
		}
	}
	return out
}

func (w *leaderWatch) end() {
	close(w.stop)
	<-w.done
}

// storeOutages are the stretches a stream of the run had no leader, each naming its
// stream; none without a cluster.
func (h *harness) storeOutages() []check.Interval {
	h.mu.Lock()
	w := h.leaders
	h.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.without()
}
