package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/lease/jetstreamstore"
)

// A tamper is what an operator's hand (or a script, or a broker that lost part of its
// store) does to the engines' records while they serve: each cycle of the tamper
// scenario does one, then hands the lease over, so the successor must read the
// tampered record and adopt its epoch in the tampered store.
type tamperKind struct {
	name string
	// do tampers; h.nc is the harness's connection.
	do func(ctx context.Context, h *harness) error
	// bucket is true for a data bucket recreated with a bad shape: the successor must
	// refuse it (not ready, nothing adopted in it) until the harness deletes it again.
	bucket bool
	// evicts is true for a tamper that takes the lease from its holder (a deleted lease
	// key): the holder fences at once and, when the standby creates the key first, ends
	// as lost (exit 1), answering the calls it had running UNAVAILABLE, "may have taken
	// effect". That cycle is judged as a takeover (answered after it), not by zero
	// failures.
	evicts bool
}

// The data buckets' names (the engines run with the default configuration).
var (
	kvBucket      = config.DefaultKeyValueBucket
	objectsBucket = config.DefaultObjectStorageBucket
)

// tamperKinds are the tampers, each drawn once per round of the scenario's cycles.
// The keyvalue data bucket is not recreated here: its deletion loses the traffic's
// acknowledged writes by itself, which would leave the history nothing to judge; the
// e2e test TestDataBucketRecreatedWithATTLIsRefused covers it with the writes counted
// from the recreation on. The object bucket, which the traffic does not use, is.
var tamperKinds = []tamperKind{
	{name: "keyvalue epoch record deleted", do: func(ctx context.Context, h *harness) error {
		kv, err := h.js().KeyValue(ctx, kvBucket)
		if err != nil {
			return err
		}
		return kv.Delete(ctx, "abi.epoch")
	}},
	{name: "keyvalue epoch record rewritten to 999", do: func(ctx context.Context, h *harness) error {
		kv, err := h.js().KeyValue(ctx, kvBucket)
		if err != nil {
			return err
		}
		_, err = kv.Put(ctx, "abi.epoch", []byte("999"))
		return err
	}},
	{name: "lease epoch record deleted", do: func(ctx context.Context, h *harness) error {
		kv, err := h.js().KeyValue(ctx, jetstreamstore.DefaultBucket)
		if err != nil {
			return err
		}
		return kv.Delete(ctx, jetstreamstore.EpochKey)
	}},
	{name: "lease key deleted", evicts: true, do: func(ctx context.Context, h *harness) error {
		kv, err := h.js().KeyValue(ctx, jetstreamstore.DefaultBucket)
		if err != nil {
			return err
		}
		return kv.Delete(ctx, jetstreamstore.Key)
	}},
	{name: "object bucket recreated with memory storage and a max age", bucket: true, do: func(ctx context.Context, h *harness) error {
		js := h.js()
		if err := js.DeleteObjectStore(ctx, objectsBucket); err != nil {
			return err
		}
		_, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: objectsBucket,
			Storage: jetstream.MemoryStorage, TTL: time.Minute})
		return err
	}},
}

func (h *harness) js() jetstream.JetStream {
	js, _ := jetstream.New(h.nc) // fails only for a nil connection
	return js
}

// tamper: engine processes of successive rollouts serve and hand over by SIGTERM while
// each cycle tampers with a record first (tamperKinds, in a seeded order): the
// successor must repair or refuse what it finds, never serve keyvalue under a record it
// cannot trust, never adopt its epoch in a bucket that can lose what is written, and
// say so in /readyz while a member cannot serve.
func tamper(h *harness) error {
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
	order := h.rng.Perm(len(tamperKinds))
	var evictions []check.Fault
	for n := 0; h.cycles(n, len(tamperKinds)); n++ {
		tk := tamperKinds[order[n%len(order)]]
		if n > 0 && n%len(order) == 0 {
			order = h.rng.Perm(len(tamperKinds))
			tk = tamperKinds[order[0]]
		}
		rollout++
		next, err := h.startProcess(fmt.Sprintf("r%d", rollout))
		if err != nil {
			return err
		}
		if err := h.waitFor(5*time.Second, next.nm+" standing by", func() bool { return next.mon.current() == "standby" }); err != nil {
			return err
		}
		if err := h.sleep(h.between(h.lease/4, h.lease)); err != nil {
			return err
		}
		at := h.fault("tamper", "%s", tk.name)
		if tk.evicts {
			evictions = append(evictions, check.Fault{Name: tk.name, Start: at, End: at})
		}
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		err = tk.do(ctx, h)
		cancel()
		if err != nil {
			return fmt.Errorf("tamper (%s): %w", tk.name, err)
		}
		if tk.bucket {
			if err := h.judgeHolderOnBadBucket(cur); err != nil {
				return err
			}
		}
		if err := h.sleep(h.between(h.lease/4, h.lease/2)); err != nil {
			return err
		}
		if tk.evicts && cur.p.Exited() {
			// Evicted, and the standby created the lease first: lost, as designed.
			want[cur] = 1
			h.expect("evicted-holder-ends-lost", cur.logged("lost"), "%s after %q: %s", cur.nm, tk.name, cur.end())
		} else {
			h.fault(cur.nm, "SIGTERM: hand over to %s after the tamper", next.nm)
			want[cur] = 0
			if err := cur.p.Terminate(); err != nil {
				return err
			}
		}
		if _, err := cur.wait(drainSeconds*time.Second + 20*time.Second); err != nil {
			return err
		}
		if err := h.waitFor(5*h.lease, next.nm+" holding the lease", func() bool { return h.holderAt(time.Now()) == next.id() }); err != nil {
			return err
		}
		if err := h.judgeSuccessor(next, tk); err != nil {
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
	// A call sent just before a cycle ended can still be running at the next cycle's
	// eviction: every cycle's calls are judged against every eviction they meet.
	evictions = h.bounded(evictions)
	h.perCycle(h.history(), func(_ check.Cycle, calls []bench.Op) check.Result {
		for _, f := range evictions {
			for _, op := range calls {
				if (f.Until.IsZero() || op.Invoke.Before(f.Until)) && !op.Complete.Before(f.Start) {
					return check.AnsweredAfterTakeover(calls, evictions, 2*h.lease)
				}
			}
		}
		return check.ZeroFailures(calls)
	})
	h.historyChecks(h.handoverOverlap())
	h.exitCodes(want)
	return nil
}

// judgeSuccessor judges the engine that took the lease after a tamper: it answers
// keyvalue calls (a record it repaired) and is ready; or, for a bucket recreated with a
// bad shape, it adopted nothing in that bucket and is not ready, naming it, until the
// harness deletes the bucket, and ready once it recreated its own.
func (h *harness) judgeSuccessor(next *procMember, tk tamperKind) error {
	if !tk.bucket {
		err := h.waitAnswering(next)
		h.expect("successor-serves-after-tamper", err == nil, "%s after %q: %s", next.nm, tk.name, errOr(err, "answers keyvalue calls"))
		ready := next.ready()
		h.expect("ready-only-when-serving", err == nil || !ready, "%s after %q: answering %v, /readyz %s", next.nm, tk.name, err == nil, readyWord(ready))
		if err != nil {
			return nil // the checks said it; the next cycle hands over from it as it is
		}
		return h.waitFor(5*h.lease, next.nm+" ready", next.ready)
	}
	// The takeover is judged once it is over: the old engine may exit (it waits for no
	// successor on a service whose backend is down) before the successor's state
	// reaches serving, and a standby on the bad bucket is not ready either.
	serving := h.waitFor(5*h.lease, next.nm+" serving", func() bool { return next.mon.current() == "serving" })
	h.expect("holder-says-serving", serving == nil, "%s holds the lease and says %q", next.nm, next.mon.current())
	notReady := h.waitFor(5*h.lease, next.nm+" not ready, naming "+objectsBucket, func() bool {
		body, ok := next.readyz()
		return !ok && strings.Contains(body, objectsBucket)
	})
	h.expect("not-ready-while-a-member-cannot-serve", notReady == nil, "%s with %s refused: %s (status %s)", next.nm, objectsBucket,
		errOr(notReady, "/readyz 503 naming it"), next.mon.current())
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	adopted, err := h.epochSubjects(ctx, "OBJ_"+objectsBucket, "$O."+objectsBucket+".C.abi.epoch")
	if err != nil {
		return err
	}
	h.expect("bad-bucket-never-adopted", len(adopted) == 0, "the recreated %s holds epoch subjects %v", objectsBucket, adopted)
	// The operator's fix: delete the bad bucket; the engine recreates its own and serves.
	h.event("step", "tamper", "%s deleted again: the engine recreates its own", objectsBucket)
	if err := h.js().DeleteObjectStore(ctx, objectsBucket); err != nil {
		return err
	}
	err = h.waitFor(5*h.lease+5*time.Second, next.nm+" ready once the bucket is its own", next.ready)
	h.expect("ready-after-the-fix", err == nil, "%s: %s", next.nm, errOr(err, "ready"))
	return nil
}

// judgeHolderOnBadBucket puts objects through the holder right after its object bucket
// was recreated with a bad shape: each put fails (the bucket lost the epoch record), the
// probe it starts must refuse the bucket rather than adopt the epoch in it, so no put is
// acknowledged, nothing is adopted, and the holder is not ready, naming the bucket.
func (h *harness) judgeHolderOnBadBucket(cur *procMember) error {
	tr, err := h.transport()
	if err != nil {
		return err
	}
	objects := client.NewObjectStorage(tr)
	var acked []string
	for i := range 5 {
		ctx, cancel := context.WithTimeout(h.ctx, h.lease)
		key := fmt.Sprintf("tamper-%d", i)
		if objects.PutObject(ctx, "chaos", key, []byte("an object put after the bucket was recreated")) == nil {
			acked = append(acked, key)
		}
		cancel()
	}
	notReady := h.waitFor(3*h.lease, cur.nm+" not ready, naming "+objectsBucket, func() bool {
		body, ok := cur.readyz()
		return !ok && strings.Contains(body, objectsBucket)
	})
	h.expect("not-ready-while-a-member-cannot-serve", notReady == nil, "%s (holder) with %s recreated: %s", cur.nm, objectsBucket,
		errOr(notReady, "/readyz 503 naming it"))
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	adopted, err := h.epochSubjects(ctx, "OBJ_"+objectsBucket, "$O."+objectsBucket+".C.abi.epoch")
	if err != nil {
		return err
	}
	h.expect("bad-bucket-never-adopted", len(adopted) == 0 && len(acked) == 0,
		"%s (holder): the recreated %s holds epoch subjects %v; puts acknowledged in it %v", cur.nm, objectsBucket, adopted, acked)
	return nil
}

// epochSubjects lists the subjects under base (the epoch record and its checks) that
// hold a message in stream: an engine's adoption writes them.
func (h *harness) epochSubjects(ctx context.Context, stream, base string) ([]string, error) {
	st, err := h.js().Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	var out []string
	for _, filter := range []string{base, base + ".>"} {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, fmt.Errorf("stream %s subjects %s: %w", stream, filter, err)
		}
		for s := range info.State.Subjects {
			out = append(out, s)
		}
	}
	return out, nil
}

// readyz is /readyz's body and whether it answered 200.
func (m *procMember) readyz() (string, bool) {
	resp, err := m.client.Get("http://" + m.httpAddr + "/readyz")
	if err != nil {
		return err.Error(), false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error(), false
	}
	return string(b), resp.StatusCode == http.StatusOK
}

func errOr(err error, ok string) string {
	if err == nil {
		return ok
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	return err.Error()
}

func readyWord(ready bool) string {
	if ready {
		return "200"
	}
	return "503"
}
