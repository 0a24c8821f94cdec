package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/protocol"
)

// acked is a write the engine acknowledged: when it was sent and acknowledged, by
// whom, and what it stored.
type acked struct {
	key, inst string
	value     []byte
	sent, at  time.Time
}

// ackedWriter sets unique keys in a loop and keeps every write the engine
// acknowledged, so the test can read them all back after the fact.
type ackedWriter struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	tr   *client.Transport

	mu    sync.Mutex
	acked []acked
	by    map[string]int
}

func startAckedWriter(t testing.TB, url string, workers int) *ackedWriter {
	t.Helper()
	tr, err := client.NewTransport(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &ackedWriter{stop: cancel, tr: tr, by: map[string]int{}}
	for n := range workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("t%d-%d", n, i)
				value := []byte(fmt.Sprintf("value %d of writer %d", i, n))
				sent := time.Now()
				inst, err := call(ctx, tr, protocol.OpSet, protocol.KVSetRequest{Key: key, Value: value}, nil)
				if err != nil {
					continue // refused or unanswered: not acknowledged, nothing to count
				}
				w.mu.Lock()
				w.acked = append(w.acked, acked{key: key, inst: inst, value: value, sent: sent, at: time.Now()})
				w.by[inst]++
				w.mu.Unlock()
			}
		}()
	}
	t.Cleanup(w.halt)
	return w
}

func (w *ackedWriter) halt() { w.stop(); w.wg.Wait() }

// ackedBy is how many writes inst acknowledged.
func (w *ackedWriter) ackedBy(inst string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.by[inst]
}

// waitAcked waits until inst has acknowledged at least n writes.
func (w *ackedWriter) waitAcked(t testing.TB, inst string, n int, within time.Duration) {
	t.Helper()
	testwait.For(t, within, fmt.Sprintf("instance %s to acknowledge %d writes", inst, n), func() bool {
		return w.ackedBy(inst) >= n
	})
}

// lost reads back every acknowledged write sent at or after since and returns how many
// were acknowledged and the ones that do not read back as written.
func (w *ackedWriter) lost(t testing.TB, since time.Time) (int, []string) {
	t.Helper()
	w.mu.Lock()
	all := append([]acked(nil), w.acked...)
	w.mu.Unlock()
	kv := client.NewKeyValue(w.tr)
	n, lost := 0, []string(nil)
	for _, a := range all {
		if a.sent.Before(since) {
			continue
		}
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, found, err := kv.Get(ctx, a.key)
		cancel()
		if err != nil || !found || !bytes.Equal(v, a.value) {
			lost = append(lost, fmt.Sprintf("%s (acknowledged by %s at %s): found %v, %q, %v", a.key, a.inst, a.at.Format("15:04:05.000"), found, v, err))
		}
	}
	return n, lost
}

// TestDeletedStoreEpochKeyUnderRollingDeploy is issue 26 finding 5 with real processes:
// abi.epoch is deleted from ABI_KV while A serves, then A is rolled to B. B repairs the
// record from its check subjects (logged), serves keyvalue under the deferred epoch and
// then its own, and every write either engine acknowledged reads back. (Before, B's
// keyvalue member retried "adopt epoch" every 500 ms for ever while /readyz said 200
// and /status said standby; no write was acknowledged after A left.)
func TestDeletedStoreEpochKeyUnderRollingDeploy(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: 2, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Drain: 2, HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	idA, idB := a.instanceID(), b.instanceID()
	w := startAckedWriter(t, srv.URL(), 4)
	w.waitAcked(t, idA, 100, 20*time.Second)
	ctx := ctxFor(t, 60*time.Second)
	kv, err := js.KeyValue(ctx, "ABI_KV")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "abi.epoch"); err != nil {
		t.Fatal(err)
	}
	w.waitAcked(t, idA, w.ackedBy(idA)+100, 20*time.Second) // A's writes check abi.epoch.1, not abi.epoch
	start := time.Now()
	a.signal(syscall.SIGTERM)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d after SIGTERM, want 0", code)
	}
	w.waitAcked(t, idB, 200, 20*time.Second)
	b.waitLog("repaired from its check subjects", time.Second)
	b.waitState("serving", 10*time.Second)
	b.waitHTTP("/readyz", 200, 10*time.Second)
	// B bumps past A's epoch once A marked its drain over: its stores adopt it too.
	b.waitLog(`"epoch":2`, 20*time.Second)
	w.waitAcked(t, idB, w.ackedBy(idB)+200, 20*time.Second)
	w.halt()
	n, lost := w.lost(t, time.Time{})
	t.Logf("%d writes acknowledged (%d by B after A's SIGTERM at %s), %d lost", n, w.ackedBy(idB), start.Format("15:04:05.000"), len(lost))
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes lost, first: %s", len(lost), n, lost[0])
	}
}

// TestDataBucketRecreatedWithATTLIsRefused is issue 26 finding 6 with a real process:
// ABI_KV is deleted and recreated from outside with memory storage, a 3 s TTL and a
// history of 5 under a serving engine. The engine never adopts it: its writes are
// refused, /readyz and /status name the bucket and each wrong setting, and no write it
// acknowledged vanishes. Once the bad bucket is deleted, the engine recreates its own
// and is ready again. (Before, the probe adopted the epoch in the recreated bucket and
// every write acknowledged after it vanished with the TTL, the engine healthy
// throughout.)
func TestDataBucketRecreatedWithATTLIsRefused(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	id := a.instanceID()
	w := startAckedWriter(t, srv.URL(), 2)
	w.waitAcked(t, id, 100, 20*time.Second)
	ctx := ctxFor(t, 90*time.Second)
	if err := js.DeleteKeyValue(ctx, "ABI_KV"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ABI_KV", History: 5,
		Storage: jetstream.MemoryStorage, TTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// A write sent from here on can reach only the recreated bucket (one sent before
	// may have been stored in the deleted one, and gone with it).
	swapped := time.Now()
	// The TTL (3 s) has passed over anything the bucket was given: no event of the
	// server's marks an expiry, so the test waits it out (and reads back after).
	time.Sleep(5 * time.Second)
	n, lost := w.lost(t, swapped)
	if len(lost) > 0 {
		t.Fatalf("%d of %d writes acknowledged after the bucket was recreated were lost, first: %s", len(lost), n, lost[0])
	}
	t.Logf("%d writes acknowledged after the bucket was recreated, none lost", n)
	body := a.waitHTTP("/readyz", 503, 20*time.Second)
	for _, want := range []string{"ABI_KV", "storage is memory (want file)", "ttl (max age) is 3s (want none)", "history is 5 (want 1)"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz %q does not name %q", body, want)
		}
	}
	if _, status, _ := a.get("/status"); !strings.Contains(status, `"up": false`) || !strings.Contains(status, "ttl (max age) is 3s") {
		t.Errorf("/status does not show the bucket refused:\n%s", status)
	}
	// The operator's fix: delete the bad bucket; the engine recreates its own.
	if err := js.DeleteKeyValue(ctx, "ABI_KV"); err != nil {
		t.Fatal(err)
	}
	a.waitHTTP("/readyz", 200, 30*time.Second)
	fixed := time.Now()
	w.waitAcked(t, id, w.ackedBy(id)+100, 20*time.Second)
	w.halt()
	n, lost = w.lost(t, fixed)
	if len(lost) > 0 {
		t.Fatalf("%d of %d writes acknowledged after the fix were lost, first: %s", len(lost), n, lost[0])
	}
	t.Logf("%d writes acknowledged after the fix, none lost", n)
}
