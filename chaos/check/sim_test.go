package check

import (
	"maps"
	"testing"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/protocol"
)

// Unit tests of the checkers on histories from a small model of the broker, the
// engines and the client: who accepts calls when, a queue group that hands each call
// to one of them, and a client that resends a call nobody received with the client's
// backoff (50 ms doubling to 500 ms) for the client's 5 s window. The same bugs (a
// handover in the wrong order, fencing skipped) are shown on real engines by the fail
// points' chaos tests (chaos/failpoints_test.go); no claim of docs/chaos.md rests on
// these.

// accept is a stretch during which an instance is subscribed and answers.
type accept struct {
	inst     string
	from, to int // ms
	// staleFrom, when set, is when the instance stopped seeing the shared store: it kept
	// answering from what it had cached (a holder cut off and never fenced).
	staleFrom int
}

type sim struct {
	accepts []accept
	store   map[string]uint64
	caches  map[string]map[string]uint64 // snapshot per stale instance
	rr      int
}

// simulate runs workers calls, each worker alternating set and get over two keys, one
// call every 10 ms of its own from 0 to until ms, against accepts.
func simulate(accepts []accept, workers, until int) []bench.Op {
	s := &sim{accepts: accepts, store: map[string]uint64{}, caches: map[string]map[string]uint64{}}
	var h []bench.Op
	next := uint64(1)
	// Calls are issued in time order across workers so the shared store evolves in order.
	for t := 0; t < until; t += 10 {
		for w := range workers {
			at := t + w // spread the workers
			key := []string{"k1", "k2"}[(at/10)%2]
			op := bench.Op{Worker: w, Key: key, Kind: protocol.OpGet}
			if (at/10+w)%2 == 0 {
				op.Kind, op.Input = protocol.OpSet, next
				next++
			}
			h = append(h, s.call(op, at))
		}
	}
	return h
}

func (s *sim) call(op bench.Op, invoke int) bench.Op {
	op.Invoke = at(invoke)
	delay, attempt := 50, invoke
	for {
		if inst, i := s.pick(attempt); inst != "" {
			s.execute(&op, i, attempt)
			op.Instance, op.Complete = inst, at(attempt+2)
			return op
		}
		if attempt+delay > invoke+5000 {
			op.Code, op.Err, op.Complete = protocol.Unavailable, "nats: no responders available for request", at(attempt)
			return op
		}
		attempt += delay
		delay = min(delay*2, 500)
	}
}

// pick is the queue group: one of the instances subscribed at t, in turn.
func (s *sim) pick(t int) (string, int) {
	var subscribed []int
	for i, a := range s.accepts {
		if t >= a.from && t < a.to {
			subscribed = append(subscribed, i)
		}
	}
	if len(subscribed) == 0 {
		return "", -1
	}
	s.rr++
	i := subscribed[s.rr%len(subscribed)]
	return s.accepts[i].inst, i
}

func (s *sim) execute(op *bench.Op, i, t int) {
	a := s.accepts[i]
	store := s.store
	if a.staleFrom > 0 && t >= a.staleFrom {
		if s.caches[a.inst] == nil {
			s.caches[a.inst] = maps.Clone(s.store)
		}
		store = s.caches[a.inst]
	}
	switch op.Kind {
	case protocol.OpSet:
		store[op.Key] = op.Input
	case protocol.OpGet:
		op.Output, op.Found = store[op.Key]
	}
}

const allowance = 250 * time.Millisecond

func TestSimulatedDesignOrderPasses(t *testing.T) {
	// Design order: A releases at 1000 and unsubscribes at once; B takes the lease and
	// subscribes 5 ms later. Calls in the gap get "no responders" and are resent.
	h := simulate([]accept{{inst: instA, from: 0, to: 1000}, {inst: instB, from: 1005, to: 3000}}, 4, 3000)
	wantPass(t, ZeroFailures(h))
	wantPass(t, NoOverlap(h, allowance))
	wantPass(t, Linearizable(h, 10*time.Second))
}

func TestSimulatedReleaseAfterDrainFailsZeroFailures(t *testing.T) {
	// Reversed: A unsubscribes at 1000, drains a long session for 6 s, and only then
	// releases; B serves at 7000. Nobody accepts for longer than the client's window.
	h := simulate([]accept{{inst: instA, from: 0, to: 1000}, {inst: instB, from: 7000, to: 9000}}, 4, 9000)
	r := ZeroFailures(h)
	wantFail(t, r, -1, "no responders")
	wantPass(t, NoOverlap(h, allowance))
}

func TestSimulatedServeBeforeReleaseFailsNoOverlap(t *testing.T) {
	// Reversed the other way: B subscribes at 1000 while A keeps accepting until it
	// releases and unsubscribes at 2000.
	h := simulate([]accept{{inst: instA, from: 0, to: 2000}, {inst: instB, from: 1000, to: 3000}}, 4, 3000)
	wantPass(t, ZeroFailures(h))
	wantFail(t, NoOverlap(h, allowance), 1, "both accepted calls for at least")
}

func TestSimulatedSkippedFencingFailsNoOverlapAndLinearizable(t *testing.T) {
	// A is cut off from the lease at 1000 and never fences; B takes over a lease later at
	// 2000 while A keeps answering from its cache until 3500.
	h := simulate([]accept{
		{inst: instA, from: 0, to: 3500, staleFrom: 2000},
		{inst: instB, from: 2000, to: 5000},
	}, 4, 5000)
	wantFail(t, NoOverlap(h, 0), 1, "aaaaaaaa and bbbbbbbb")
	wantFail(t, Linearizable(h, 10*time.Second), -1, `key "k`)

	// The same cut with fencing: A stops accepting at 1500 (lease/2), B serves at 2000.
	fenced := simulate([]accept{{inst: instA, from: 0, to: 1500}, {inst: instB, from: 2000, to: 5000}}, 4, 5000)
	wantPass(t, NoOverlap(fenced, 0))
	wantPass(t, Linearizable(fenced, 10*time.Second))
	wantPass(t, ZeroFailures(fenced)) // a 500 ms gap is within the client's window
}
