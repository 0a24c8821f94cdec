package backendhealth

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/memory"
	"github.com/abi-engine/engine/protocol"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestBackendHealth is the timing of issue 10 item 3: only backend failures count; one
// starts a probe that reruns with a growing pause until the backend answers; the backend
// is down meanwhile; the failure log is one line per period, with the count.
func TestBackendHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		var failures, probes atomic.Int32
		answer := make(chan error)
		probe := func(ctx context.Context) (bool, error) {
			probes.Add(1)
			select {
			case err := <-answer:
				return false, err
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		h := New("keyvalue", "jetstream", zap.New(core), probe, func() { failures.Add(1) }, func() {})
		defer h.Close()

		for _, err := range []error{nil, protocol.Errorf(protocol.NotFound, "x"), protocol.Errorf(protocol.InvalidArgument, "x"),
			protocol.Errorf(protocol.Conflict, "x"), context.Canceled} {
			h.Observe(err)
		}
		synctest.Wait()
		if failures.Load() != 0 || probes.Load() != 0 {
			t.Fatalf("caller errors counted as backend failures: %d, probes %d", failures.Load(), probes.Load())
		}

		broken := protocol.Errorf(protocol.Unavailable, "bucket gone")
		for range 100 {
			h.Observe(broken)
		}
		h.Observe(context.DeadlineExceeded)
		synctest.Wait()
		if failures.Load() != 101 || probes.Load() != 1 {
			t.Fatalf("failures %d probes %d, want 101 and one probe running", failures.Load(), probes.Load())
		}
		if n := logs.FilterMessage("backend call failed").Len(); n != 1 {
			t.Fatalf("%d failure log lines for a burst, want 1", n)
		}
		if h.Down() != nil {
			t.Fatal("down before a probe failed")
		}
		answer <- errors.New("stream not found")
		synctest.Wait()
		if err := h.Down(); err == nil || err.Error() != "keyvalue backend (jetstream) down: stream not found" {
			t.Fatalf("Down = %v", err)
		}
		// The next probes come after 250 ms, then 500 ms.
		start := time.Now()
		answer <- errors.New("still gone")
		synctest.Wait()
		answer <- nil
		synctest.Wait()
		if took := time.Since(start); took != 750*time.Millisecond {
			t.Fatalf("probes 2 and 3 after %s, want 750ms", took)
		}
		if h.Down() != nil || probes.Load() != 3 {
			t.Fatalf("down %v after a good probe (%d probes)", h.Down(), probes.Load())
		}
		if logs.FilterMessage("backend down: a serving engine is not ready until it answers").Len() != 1 ||
			logs.FilterMessage("backend answers again").Len() != 1 {
			t.Fatalf("down/up not logged once each: %v", logs.All())
		}
		time.Sleep(failureLogEvery)
		h.Observe(broken)
		if n := logs.FilterMessage("backend call failed").Len(); n != 2 {
			t.Fatalf("%d failure log lines after the period, want 2", n)
		}
		if got := logs.FilterMessage("backend call failed").All()[1].ContextMap()["failures_since_last_line"]; got != int64(101) {
			t.Fatalf("second log line counts %v failures, want the 101 since the first", got)
		}
		answer <- nil
	})
}

// The health wrapper passes a backend's shared read through (the memory backend's
// get without a copy), and observes its failures like any other call.
func TestHealthyKeyValuePassesTheSharedReadThrough(t *testing.T) {
	var failures atomic.Int32
	h := New("keyvalue", "memory", zap.NewNop(), func(context.Context) (bool, error) { return false, nil }, func() { failures.Add(1) }, func() {})
	defer h.Close()
	store := memory.New()
	ctx := context.Background()
	if err := store.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	kv := KeyValue{Store: store, H: h}
	want, _, _ := store.GetShared(ctx, "k")
	got, found, err := keyvalue.GetShared(ctx, kv, "k")
	if err != nil || !found || unsafe.SliceData(got) != unsafe.SliceData(want) {
		t.Fatalf("GetShared through the wrapper: %q, %v, %v; the stored bytes: %v", got, found, err, unsafe.SliceData(got) == unsafe.SliceData(want))
	}
	if _, _, err := kv.GetShared(ctx, ""); err == nil || failures.Load() != 0 {
		t.Fatalf("an empty key: %v, counted as %d backend failures", err, failures.Load())
	}
}
