package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// traffic runs set-then-get loops through the SDK and records what each call got.
type traffic struct {
	stop    context.CancelFunc
	wg      sync.WaitGroup
	ok      atomic.Int64
	mu      sync.Mutex
	fails   []string
	bad     []string         // reads that did not return what was written
	seen    map[int][]string // per worker, the instances that answered, in order
	lastOK  time.Time
	maxGap  time.Duration // longest time without a successful reply, over all workers
	counts  map[string]int
	started time.Time
}

func startTraffic(t testing.TB, url string, workers int) *traffic {
	t.Helper()
	nc := natstest.Connect(t, url)
	tr, err := client.NewTransport(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tf := &traffic{stop: cancel, seen: map[int][]string{}, counts: map[string]int{}, started: time.Now()}
	tf.lastOK = time.Now()
	for w := range workers {
		tf.wg.Add(1)
		go func() {
			defer tf.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("w%d-%d", w, i)
				value := []byte(fmt.Sprintf("value %d of worker %d", i, w))
				inst, err := call(ctx, tr, protocol.OpSet, protocol.KVSetRequest{Key: key, Value: value}, nil)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					tf.fail(w, "set %s: %v", key, err)
					continue
				}
				tf.record(w, inst)
				var got protocol.KVGetReply
				inst, err = call(ctx, tr, protocol.OpGet, protocol.KVKeyRequest{Key: key}, &got)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					tf.fail(w, "get %s: %v", key, err)
					continue
				}
				tf.record(w, inst)
				if !got.Found || !bytes.Equal(got.Value, value) {
					tf.mu.Lock()
					tf.bad = append(tf.bad, fmt.Sprintf("get %s = %v %q, want %q", key, got.Found, got.Value, value))
					tf.mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(tf.halt)
	return tf
}

func call(ctx context.Context, tr *client.Transport, op string, req any, reply any) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := tr.Request(cctx, protocol.ServiceSubject(protocol.KeyValue, op), body, nil)
	if err != nil {
		return "", err
	}
	if reply != nil {
		if err := json.Unmarshal(r.Data, reply); err != nil {
			return r.Instance, err
		}
	}
	return r.Instance, nil
}

func (tf *traffic) fail(w int, format string, args ...any) {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	tf.fails = append(tf.fails, fmt.Sprintf("worker %d: ", w)+fmt.Sprintf(format, args...))
}

func (tf *traffic) record(w int, inst string) {
	tf.ok.Add(1)
	tf.mu.Lock()
	defer tf.mu.Unlock()
	now := time.Now()
	if gap := now.Sub(tf.lastOK); gap > tf.maxGap {
		tf.maxGap = gap
	}
	tf.lastOK = now
	tf.counts[inst]++
	if s := tf.seen[w]; len(s) == 0 || s[len(s)-1] != inst {
		tf.seen[w] = append(s, inst)
	}
}

// answeredBy is how many calls inst has answered.
func (tf *traffic) answeredBy(inst string) int {
	tf.mu.Lock()
	defer tf.mu.Unlock()
	return tf.counts[inst]
}

// waitAnswers waits until inst has answered at least n calls.
func (tf *traffic) waitAnswers(t testing.TB, inst string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for tf.answeredBy(inst) < n {
		if time.Now().After(deadline) {
			t.Fatalf("instance %s answered %d calls within %s, want %d", inst, tf.answeredBy(inst), within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tf *traffic) halt() {
	tf.stop()
	tf.wg.Wait()
}

// wantHandedOver checks that every worker was answered by from, then by to. While to's
// subscriptions are confirmed at the broker and from's UNSUB is on its way both take
// calls (the designed overlap, docs/architecture.md cascade 1), so a worker may meet
// from again in between; it ends with to.
func (tf *traffic) wantHandedOver(t *testing.T, from, to string) {
	t.Helper()
	for w, seq := range tf.seen {
		ok := len(seq) > 0 && seq[len(seq)-1] == to && (seq[0] == from || len(seq) == 1)
		for _, inst := range seq {
			ok = ok && (inst == from || inst == to)
		}
		if !ok {
			t.Errorf("worker %d was answered by %v, want %s then %s", w, seq, from, to)
		}
	}
}
