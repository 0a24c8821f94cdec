package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/abi-engine/engine/internal/leakcheck"
	"github.com/abi-engine/engine/internal/testwait"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Known()...) }

// cfg is an engine configuration against url. The lease is short for quick tests but
// long enough that a loaded machine (the race detector, packages tested in parallel)
// does not fence an engine whose test is about something else.
func cfg(t *testing.T, url, role, rollout, adapters string) *config.Config {
	t.Helper()
	c := config.Default()
	c.NATS.URL = url
	c.NATS.Engine.Role = config.Role(role)
	c.NATS.Engine.RolloutID = rollout
	c.NATS.Engine.LeaseSeconds = 3
	c.NATS.Engine.DrainSeconds = 5
	c.HTTP.Listen = ""
	switch adapters {
	case "memory":
		c.Services.KeyValue.Adapter = config.KeyValueMemory
		c.Services.ObjectStorage.Adapter = config.ObjectStorageMemory
	default:
		c.Services.KeyValue.Adapter = config.KeyValueJetStream
		c.Services.ObjectStorage.Adapter = config.ObjectStorageJetStream
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func newEngine(t *testing.T, c *config.Config, opts ...engine.Option) *engine.Engine {
	t.Helper()
	e, err := engine.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return e
}

func load(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
}

func transport(t *testing.T, url string) *client.Transport {
	t.Helper()
	tr, err := client.NewTransport(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func leaseRecord(t *testing.T, url string) lease.Record {
	t.Helper()
	s, err := jetstreamstore.Open(context.Background(), natstest.Connect(t, url), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestServeAndShutdown(t *testing.T) {
	srv := natstest.Start(t)
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"), engine.WithVersion("1.2.3"))
	load(t, e)
	if e.State() != engine.StateServing || !e.Ready() || e.Healthy() != nil {
		t.Fatalf("state %s ready %v healthy %v", e.State(), e.Ready(), e.Healthy())
	}
	kv := client.NewKeyValue(transport(t, srv.URL()))
	ctx := context.Background()
	if err := kv.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := kv.Get(ctx, "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	// The engine's own service is the local backend, which holds what the client set.
	if v, ok, _ := e.KeyValue().Get(ctx, "k"); !ok || string(v) != "v" {
		t.Fatal("the engine's local keyvalue does not hold the value set through NATS")
	}
	r := leaseRecord(t, srv.URL())
	if r.Holder.InstanceID != e.InstanceID() || r.Holder.Version != "1.2.3" {
		t.Fatalf("lease holder %v", r.Holder)
	}
	st := e.Status().(engine.Status)
	if st.State != engine.StateServing || st.Lease.Holder == nil || st.Lease.Holder.InstanceID != e.InstanceID() {
		t.Fatalf("status %+v", st)
	}
	if got := stateGauge(t, e, "serving").value(t); got != 1 {
		t.Fatalf("abi_engine_state{serving} = %v", got)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := e.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(sctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	select {
	case <-e.Done():
	default:
		t.Fatal("Done not closed after Shutdown")
	}
	if r := leaseRecord(t, srv.URL()); !r.Free() {
		t.Fatalf("lease after shutdown: %v", r)
	}
	if _, _, err := kv.Get(ctx, "k"); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Get after shutdown = %v, want no responders (UNAVAILABLE)", err)
	}
}

// stateGauge finds abi_engine_state{state=s} in the engine's registry.
func stateGauge(t *testing.T, e *engine.Engine, s string) float64Collector {
	t.Helper()
	return float64Collector{e: e, state: s}
}

type float64Collector struct {
	e     *engine.Engine
	state string
}

func (f float64Collector) value(t *testing.T) float64 {
	mfs, err := f.e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "abi_engine_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == f.state {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no abi_engine_state{state=%q}", f.state)
	return 0
}

func TestShutdownBeforeLoadAndTwice(t *testing.T) {
	e, err := engine.New(cfg(t, "nats://127.0.0.1:1", "serve", "", "memory"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Load(ctx); !errors.Is(err, engine.ErrShutDown) {
		t.Fatalf("Load after Shutdown = %v", err)
	}
}

func TestSecondEngineIsRefusedAndAutoBecomesAClient(t *testing.T) {
	srv := natstest.Start(t)
	a := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	load(t, a)
	b := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Load(ctx)
	var as *lease.AlreadyServingError
	if !errors.As(err, &as) || as.Holder.InstanceID != a.InstanceID() {
		t.Fatalf("second Load = %v, want AlreadyServingError naming a", err)
	}
	if b.KeyValue() != nil {
		t.Fatal("a refused engine opened its keyvalue backend")
	}

	// auto next to a serving engine is a client whose services reach a.
	c := newEngine(t, cfg(t, srv.URL(), "auto", "v9", "memory"))
	load(t, c)
	if c.State() != engine.StateClient || c.Role() != config.RoleClient {
		t.Fatalf("auto next to a serving engine: state %s role %s", c.State(), c.Role())
	}
	bg := context.Background()
	if err := c.KeyValue().Set(bg, "from-auto", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := a.KeyValue().Get(bg, "from-auto"); !ok || string(v) != "x" {
		t.Fatal("the auto client's write did not reach the serving engine")
	}
	if a.State() != engine.StateServing {
		t.Fatalf("a is %s", a.State())
	}
}

func TestAutoServesAlone(t *testing.T) {
	srv := natstest.Start(t)
	e := newEngine(t, cfg(t, srv.URL(), "auto", "", "memory"))
	load(t, e)
	if e.State() != engine.StateServing || e.Role() != config.RoleServe {
		t.Fatalf("auto alone: %s %s", e.State(), e.Role())
	}
}

func TestClientEngineTouchesNothing(t *testing.T) {
	srv := natstest.Start(t)
	dir := t.TempDir()
	t.Chdir(dir)
	c := newEngine(t, cfg(t, srv.URL(), "client", "", "memory"))
	load(t, c)
	if c.State() != engine.StateClient {
		t.Fatalf("state %s", c.State())
	}
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(context.Background(), jetstreamstore.DefaultBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("a client engine touched the lease bucket: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("a client engine wrote files: %v %v", entries, err)
	}
	// With nobody serving, its calls end in "no responders" within the retry window.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := c.KeyValue().Get(ctx, "k"); err == nil {
		t.Fatal("a client engine answered a call itself")
	}
}

func TestHandoverToAStandbyUnderTraffic(t *testing.T) {
	srv := natstest.Start(t)
	a := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"))
	load(t, a)
	b := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"))
	load(t, b)
	if b.State() != engine.StateStandby || !b.Ready() {
		t.Fatalf("b: %s ready %v", b.State(), b.Ready())
	}
	kv := client.NewKeyValue(transport(t, srv.URL()))
	var fails atomic.Int64
	var calls atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		bg := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := "k" + strings.Repeat("x", i%7)
			if err := kv.Set(bg, key, []byte{byte(i)}, 0); err != nil {
				fails.Add(1)
				continue
			}
			if v, ok, err := kv.Get(bg, key); err != nil || !ok || len(v) != 1 || v[0] != byte(i) {
				fails.Add(1)
			}
			calls.Add(1)
		}
	}()
	stopTraffic := sync.OnceFunc(func() { close(stop); <-done })
	defer stopTraffic()
	testwait.For(t, 20*time.Second, "50 calls before the handover", func() bool { return calls.Load() >= 50 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "b serving", func() bool { return b.State() == engine.StateServing })
	n := calls.Load()
	testwait.For(t, 20*time.Second, "50 calls after the handover", func() bool { return calls.Load() >= n+50 })
	stopTraffic()
	if b.State() != engine.StateServing {
		t.Fatalf("b is %s after the handover", b.State())
	}
	if f := fails.Load(); f != 0 {
		t.Fatalf("%d failed calls across the handover", f)
	}
}

func TestJobsRunOnlyOnTheServingEngine(t *testing.T) {
	srv := natstest.Start(t)
	var runsA, runsB atomic.Int64
	job := func(n *atomic.Int64) engine.Job {
		return engine.Job{Name: "count", Schedule: engine.Every(20 * time.Millisecond), Run: func(context.Context) error {
			n.Add(1)
			return nil
		}}
	}
	a := newEngine(t, cfg(t, srv.URL(), "serve", "v1", "jetstream"), engine.WithJob(job(&runsA)))
	load(t, a)
	b := newEngine(t, cfg(t, srv.URL(), "serve", "v2", "jetstream"), engine.WithJob(job(&runsB)))
	load(t, b)
	testwait.For(t, 10*time.Second, "three runs on the serving engine", func() bool { return runsA.Load() >= 3 })
	if runsB.Load() != 0 {
		t.Fatal("a standby ran a job")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	after := runsA.Load()
	testwait.For(t, 10*time.Second, "three runs on the new serving engine", func() bool { return runsB.Load() >= 3 })
	if runsA.Load() != after {
		t.Fatal("a job ran after its engine handed over")
	}
}

func TestEmbedderServiceIsServed(t *testing.T) {
	srv := natstest.Start(t)
	type echo struct {
		protocol.Ctx
		Text string `json:"text"`
	}
	svc := engine.Service{Name: "echo", Data: engine.SharedData(), Operations: map[string]primaries.Operation{
		"say": primaries.Handle(func(_ context.Context, r *echo) (echo, error) { return echo{Text: r.Text}, nil }),
	}}
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"), engine.WithService(svc))
	load(t, e)
	tr := transport(t, srv.URL())
	body, _ := json.Marshal(echo{Text: "hi"})
	r, err := tr.Request(context.Background(), protocol.ServiceSubject("echo", "say"), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got echo
	if err := json.Unmarshal(r.Data, &got); err != nil || got.Text != "hi" || r.Instance != e.InstanceID() {
		t.Fatalf("reply %q from %s: %v", r.Data, r.Instance, err)
	}
}

func TestLostLeaseEndsTheEngine(t *testing.T) {
	srv := natstest.Start(t)
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	load(t, e)
	loseLease(t, e, srv.URL())
	var lost *lease.LostError
	if !errors.As(e.Err(), &lost) || lost.Holder.InstanceID != "engine-thief" {
		t.Fatalf("Err = %v", e.Err())
	}
}

// A Load that fails after the claim (here: the keyvalue backend cannot be opened) gives
// the lease up and leaves no subscription behind.
func TestFailedLoadGivesUpTheLease(t *testing.T) {
	srv := natstest.Start(t)
	c := cfg(t, srv.URL(), "serve", "", "memory")
	c.Services.KeyValue.Adapter = config.KeyValuePostgres
	c.Services.KeyValue.DSN = "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=1"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Load(ctx); err == nil || !strings.Contains(err.Error(), "keyvalue") {
		t.Fatalf("Load = %v, want the keyvalue backend's failure", err)
	}
	if r := leaseRecord(t, srv.URL()); !r.Free() {
		t.Fatalf("lease after a failed Load: %v", r)
	}
	select {
	case <-e.Done():
	default:
		t.Fatal("Done not closed after a failed Load")
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after a failed Load: %v", err)
	}
	// Nobody answers the kernel subjects: a second engine can serve at once.
	b := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	load(t, b)
}
