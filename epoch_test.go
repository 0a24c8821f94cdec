package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// holdService is an embedder's service whose one call waits until release is closed:
// a call in flight that keeps an engine draining.
func holdService(started chan<- struct{}, release <-chan struct{}) engine.Service {
	type req struct{ protocol.Ctx }
	return engine.Service{Name: "hold", Data: engine.SharedData(), Operations: map[string]primaries.Operation{
		"wait": primaries.Handle(func(ctx context.Context, _ *req) (struct{}, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return struct{}{}, nil
		}),
	}}
}

func leaseEpochMetric(t *testing.T, e *engine.Engine) string {
	t.Helper()
	for _, line := range strings.Split(scrape(t, e), "\n") {
		if v, ok := strings.CutPrefix(line, "abi_engine_lease_epoch "); ok {
			return v
		}
	}
	t.Fatal("/metrics has no abi_engine_lease_epoch")
	return ""
}

// TestEpochAcrossAHandover is issue 12's epoch as an embedder and an operator see it:
// Engine.Epoch, /status lease.epoch and abi_engine_lease_epoch agree; the standby holds
// none; after the handover it serves under the old engine's epoch while that engine
// answers a call it had received, and under the next one, logged once with the old and
// the new epoch and "deferred", as soon as the old engine's drain is over.
func TestEpochAcrossAHandover(t *testing.T) {
	srv := natstest.Start(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	a := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"), engine.WithService(holdService(started, release)))
	load(t, a)
	core, logs := observer.New(zap.InfoLevel)
	b := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"),
		engine.WithService(holdService(make(chan struct{}, 1), release)), engine.WithLogger(zap.New(core)))
	load(t, b)
	show := func(e *engine.Engine) string {
		return fmt.Sprintf("Epoch() %d, /status lease.epoch %d, metric %s", e.Epoch(), e.Status().(engine.Status).Lease.Epoch, leaseEpochMetric(t, e))
	}
	if got := show(a); got != "Epoch() 1, /status lease.epoch 1, metric 1" {
		t.Fatalf("the first engine: %s", got)
	}
	if got := show(b); got != "Epoch() 0, /status lease.epoch 0, metric 0" || b.State() != engine.StateStandby {
		t.Fatalf("the standby (%s): %s", b.State(), got)
	}

	tr := transport(t, srv.URL())
	answered := make(chan error, 1)
	go func() {
		_, err := tr.Request(context.Background(), protocol.ServiceSubject("hold", "wait"), []byte(`{}`), nil)
		answered <- err
	}()
	<-started // a holds a call
	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdown <- a.Shutdown(ctx)
	}()
	testwait.For(t, 10*time.Second, "b serving", func() bool { return b.State() == engine.StateServing })
	if got := show(b); got != "Epoch() 1, /status lease.epoch 1, metric 1" {
		t.Fatalf("b while a drains: %s, want a's epoch 1", got)
	}
	close(release)
	if err := <-answered; err != nil {
		t.Fatalf("the call a held during its drain: %v", err)
	}
	testwait.For(t, 10*time.Second, "b under epoch 2", func() bool { return b.Epoch() == 2 })
	if err := <-shutdown; err != nil {
		t.Fatal(err)
	}
	if got := show(b); got != "Epoch() 2, /status lease.epoch 2, metric 2" {
		t.Fatalf("b after a's drain: %s", got)
	}
	bumps := logs.FilterField(zap.String("event", "epoch_bumped")).All()
	if len(bumps) != 1 {
		t.Fatalf("%d epoch_bumped lines on b, want 1", len(bumps))
	}
	f := bumps[0].ContextMap()
	if bumps[0].Message != "engine epoch 1 -> 2" || f["old_epoch"] != uint64(1) || f["epoch"] != uint64(2) ||
		f["deferred"] != true || f["holder"] != b.InstanceID() || f["previous_holder"] != a.InstanceID() {
		t.Fatalf("bump logged as %q %v", bumps[0].Message, f)
	}
	body, _ := json.Marshal(b.Status())
	if !strings.Contains(string(body), `"epoch":2`) {
		t.Fatalf("/status body %s lacks lease.epoch", body)
	}
}

// TestLostEpochRecordIsPassed: ABI_ENGINE's epoch record lost (deleted, or the bucket
// recreated) while a data bucket keeps its epoch. The next holder starts again from 1,
// the bucket refuses that, and the holder bumps past the bucket's epoch and serves,
// instead of retrying an adoption that can never succeed (as before StoreAhead).
func TestLostEpochRecordIsPassed(t *testing.T) {
	srv := natstest.Start(t)
	shutdown := func(e *engine.Engine) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for want, rollout := range []string{"v1", "v2"} {
		e := newEngine(t, cfg(t, srv.URL(), "serve", rollout, "jetstream"))
		load(t, e)
		testwait.For(t, 10*time.Second, rollout+" serving", func() bool { return e.State() == engine.StateServing })
		if e.Epoch() != uint64(want+1) {
			t.Fatalf("%s serves under epoch %d, want %d", rollout, e.Epoch(), want+1)
		}
		shutdown(e)
	}
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), jetstreamstore.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(context.Background(), jetstreamstore.EpochKey); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	c := newEngine(t, cfg(t, srv.URL(), "serve", "v3", "jetstream"), engine.WithLogger(zap.New(core)))
	load(t, c)
	testwait.For(t, 15*time.Second, "v3 serving under epoch 3", func() bool {
		return c.State() == engine.StateServing && c.Epoch() == 3
	})
	if n := logs.FilterMessageSnippet("the lease's epoch record was lost").Len(); n == 0 {
		t.Fatal("the bump past the data bucket was not logged")
	}
	kvc := client.NewKeyValue(transport(t, srv.URL()))
	if err := kvc.Set(context.Background(), "after-the-loss", []byte("v"), 0); err != nil {
		t.Fatalf("a write under epoch 3: %v", err)
	}
}
