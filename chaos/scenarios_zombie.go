package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/protocol"
)

// zombieKey is the key of cycle n's stalled write and its successor's write; the
// commit log records it (watchedPrefix).
func zombieKey(n int) string { return fmt.Sprintf("%szombie-%d", watchedPrefix, n) }

// Workers of the calls zombie-write sends itself, apart from the traffic's.
const (
	zombieWorker    = 1000
	successorWorker = 2000
)

// zombieWrite: the holder is stalled (fail point stall-before-write) between its lease
// check and a write to a key, SIGSTOPped past a takeover, the successor writes the
// same key, and the zombie is resumed: its write goes out at once, and storage must
// refuse it by its stale epoch. The commit log of the key shows what storage
// committed; no-stale-write fails if the zombie's write committed after the
// successor's (a lost update, which no check of the calls alone can see).
func zombieWrite(h *harness) error {
	// The stall outlasts the takeover and the successor's write, so the zombie's write
	// goes out the moment it is resumed, as a write held up by a pause would.
	stall := 3 * h.lease / 2
	stallOn := func(n int) string { return fmt.Sprintf("stall-before-write=key:%s:%s", zombieKey(n), stall) }
	if err := h.startBroker(); err != nil {
		return err
	}
	want := map[*procMember]int{}
	rollout := 1
	cur, err := h.startProcess("r1", stallOn(1))
	if err != nil {
		return err
	}
	// Sent once: the zombie's write can reach no engine but the holder it was sent to.
	once, err := client.NewTransport(h.nc, h.clientOptions(client.WithRetryPolicy(client.RetryPolicy{}))...)
	if err != nil {
		return err
	}
	log, err := h.commitLog(h.ctx)
	if err != nil {
		return err
	}
	if err := h.startTraffic(); err != nil {
		return err
	}
	writers := map[uint64]string{} // who wrote each value of the zombie keys
	// The zombie's calls are the scenario's: a scenario that breaks down ends them and
	// waits for them.
	zctx, endZombies := context.WithCancel(context.WithoutCancel(h.ctx))
	var zombies sync.WaitGroup
	defer func() {
		endZombies()
		zombies.Wait()
	}()
	var pcs []pauseCycle
	var successors []*procMember
	for n := 0; h.cycles(n, 1); n++ {
		key := zombieKey(n + 1)
		if err := log.watch(h.ctx, key); err != nil {
			return err
		}
		rollout++
		standby, err := h.startProcess(fmt.Sprintf("r%d", rollout), stallOn(n+2))
		if err != nil {
			return err
		}
		if err := h.sleep(h.between(h.lease/2, h.lease)); err != nil {
			return err
		}
		value := []byte(fmt.Sprintf("zombie write %d of seed %d", n+1, h.opts.Seed))
		writers[bench.ValueHash(value)] = cur.id()
		zombie := make(chan bench.Op, 1)
		zombies.Go(func() {
			op := bench.Set(zctx, once, zombieWorker+n, key, value, stall+10*h.lease)
			h.rec.Record(op)
			zombie <- op
		})
		if err := h.waitFor(h.lease, cur.nm+" stalling the write to "+key, func() bool { return cur.logged("stalling a call on key") }); err != nil {
			return err
		}
		stalledAt := time.Now()
		if err := cur.p.Pause(); err != nil {
			return err
		}
		stopAt := h.fault(cur.nm, "SIGSTOP: its write to %q stalled after its lease check", key)
		if err := h.waitFor(5*h.lease, standby.nm+" serving", func() bool { return standby.mon.current() == "serving" }); err != nil {
			return err
		}
		succ, err := h.writeThrough(standby, key, n)
		if err != nil {
			return err
		}
		writers[succ.Input] = standby.id()
		if err := h.sleep(time.Until(stalledAt.Add(stall))); err != nil {
			return err
		}
		contAt := h.fault(cur.nm, "SIGCONT: its stalled write goes out")
		if err := cur.p.Resume(); err != nil {
			return err
		}
		pcs = append(pcs, pauseCycle{stop: stopAt, cont: contAt, paused: cur.nm})
		successors = append(successors, standby)
		want[cur] = 1
		if code, err := cur.wait(5 * h.lease); err != nil || code != 1 || !cur.logged("took the engine lease") {
			h.expect("resumed-holder-exits-lost", false, "%s after SIGCONT: exit %d, %v; want exit 1 with the lease lost (log %s):\n%s", cur.nm, code, err, cur.logPath, tail(cur.logPath, 5))
		} else {
			h.expect("resumed-holder-exits-lost", true, "%s exited 1 as lost %s after SIGCONT", cur.nm, cur.p.ExitedAt().Sub(contAt).Round(time.Millisecond))
		}
		h.judgeZombie(log, key, <-zombie, succ, writers)
		if err := h.sleep(h.lease); err != nil {
			return err
		}
		cur = standby
	}
	return h.endPauses(cur, want, pcs, successors)
}

// writeThrough writes a fresh value to key until the successor answers one: a call the
// broker hands to the paused holder's subscription waits there (and times out), and
// the paused holder refuses it when it resumes, having run nothing.
func (h *harness) writeThrough(successor *procMember, key string, n int) (bench.Op, error) {
	tr, err := h.transport()
	if err != nil {
		return bench.Op{}, err
	}
	for attempt := 1; attempt <= 20; attempt++ {
		value := []byte(fmt.Sprintf("successor write %d.%d of seed %d", n+1, attempt, h.opts.Seed))
		op := bench.Set(h.ctx, tr, successorWorker+n, key, value, h.lease/2)
		h.rec.Record(op)
		if !op.Failed() && op.Instance == successor.id() {
			h.event("step", successor.nm, "wrote %q (attempt %d)", key, attempt)
			return op, nil
		}
		if h.ctx.Err() != nil {
			return op, h.ctx.Err()
		}
	}
	return bench.Op{}, fmt.Errorf("%s did not answer a write to %q in 20 attempts", successor.nm, key)
}

// judgeZombie judges a cycle's zombie write: storage refused it (its call answered
// UNAVAILABLE, retryable), and no write of a holder whose lease was taken over
// committed after the successor's (what the key's commit log shows).
func (h *harness) judgeZombie(log commitLog, key string, zombie, succ bench.Op, writers map[uint64]string) {
	refused := zombie.Failed() && zombie.Code == protocol.Unavailable && !zombie.Indefinite
	h.expect("zombie-write-refused", refused, "the zombie's write to %q: %s", key, outcome(zombie))
	var mine []check.Commit
	// The successor's write was acknowledged, and so, if it committed, was the
	// zombie's: each is in the log once the watch has delivered it.
	_ = h.waitFor(2*time.Second, "the commit log of "+key, func() bool {
		all, err := log.commits(h.ctx)
		if err != nil {
			return false
		}
		mine = mine[:0]
		seen := map[uint64]bool{}
		for _, c := range all {
			if c.Key == key {
				mine = append(mine, c)
				seen[c.Hash] = true
			}
		}
		return seen[succ.Input] && (zombie.Failed() || seen[zombie.Input])
	})
	h.checkNow(check.NoStaleWrite(mine, writers, h.leaseEvents()))
}

// outcome describes a call's end for a report line.
func outcome(op bench.Op) string {
	switch {
	case !op.Failed():
		return "committed, answered by " + report.Short(op.Instance)
	case op.Indefinite:
		return fmt.Sprintf("%s of unknown outcome (%s)", op.Code, op.Err)
	}
	return fmt.Sprintf("refused, %s: %s", op.Code, op.Err)
}
