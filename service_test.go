package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/examples/counter"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// A rollout id with an embedder's service declared local is refused by New, before
// anything is touched, naming the service and where its data is; declared shared, it
// is accepted.
func TestRolloutRefusesALocalEmbedderService(t *testing.T) {
	srv := natstest.Start(t)
	c := cfg(t, srv.URL(), "serve", "v2", "jetstream")
	local := counter.Service(counter.NewMemory())
	_, err := engine.New(c, engine.WithService(local))
	var lb *config.LocalBackendsError
	if !errors.As(err, &lb) || len(lb.Local) != 1 || lb.Local[0].Service != "counter" || lb.Local[0].Where != "this process" {
		t.Fatalf("New with a local service and a rollout id = %v, want a LocalBackendsError naming counter", err)
	}
	if !strings.Contains(err.Error(), "counter: this process") || !strings.Contains(err.Error(), "rollout v2") {
		t.Fatalf("the refusal does not name the service and its data: %v", err)
	}
	js, jerr := jetstream.New(natstest.Connect(t, srv.URL()))
	if jerr != nil {
		t.Fatal(jerr)
	}
	if _, err := js.KeyValue(context.Background(), jetstreamstore.DefaultBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("a refused engine touched the broker: the lease bucket %v", err)
	}
	// Without a rollout id, or declared shared, it may serve.
	if _, err := engine.New(cfg(t, srv.URL(), "serve", "", "jetstream"), engine.WithService(local)); err != nil {
		t.Fatalf("no rollout id: %v", err)
	}
	shared := local
	shared.Data = engine.SharedData()
	if _, err := engine.New(c, engine.WithService(shared)); err != nil {
		t.Fatalf("a shared service with a rollout id: %v", err)
	}
}

// Every option given a value it cannot use makes New fail naming the option.
func TestOptionsNameWhatIsWrong(t *testing.T) {
	op := map[string]primaries.Operation{"x": func(context.Context, []byte) ([]byte, error) { return nil, nil }}
	svc := func(mod func(*engine.Service)) engine.Option {
		s := engine.Service{Name: "mine", Data: engine.SharedData(), Operations: op}
		mod(&s)
		return engine.WithService(s)
	}
	for _, tc := range []struct {
		opt  engine.Option
		want string
	}{
		{engine.WithLogger(nil), "WithLogger"},
		{engine.WithTracerProvider(nil), "WithTracerProvider"},
		{engine.WithVersion(""), "WithVersion"},
		{engine.WithInstanceID("nope"), `WithInstanceID("nope")`},
		{engine.WithRegistry(nil), "WithRegistry"},
		{engine.WithJob(engine.Job{Name: "j"}), `WithJob: actors: job "j" needs a schedule`},
		{nil, "option 0 of New is nil"},
		{svc(func(s *engine.Service) { s.Data = engine.Data{} }), `WithService("mine"): Data is not set`},
		{svc(func(s *engine.Service) { s.Data = engine.LocalData("") }), `WithService("mine"): LocalData needs`},
		{svc(func(s *engine.Service) { s.Name = "a.b" }), `WithService("a.b"): the name must be a single subject token`},
		{svc(func(s *engine.Service) { s.Name = protocol.KeyValue }), "is a kernel service's name"},
		{svc(func(s *engine.Service) { s.Operations = nil }), "Operations is empty"},
		{svc(func(s *engine.Service) { s.Operations = map[string]primaries.Operation{"x": nil} }), `operation "x" is nil`},
		{svc(func(s *engine.Service) { s.Transfers = map[string]sessions.Handler{"a b": nil} }), `transfer "a b" is not a single subject token`},
		{svc(func(s *engine.Service) { s.Errors = engine.ErrorCodes{{Target: errors.New("x"), Code: "NOPE"}} }), `maps to "NOPE"`},
		{svc(func(s *engine.Service) { s.Errors = engine.ErrorCodes{{Code: protocol.NotFound}} }), "nil Target"},
	} {
		_, err := engine.New(cfg(t, "nats://127.0.0.1:1", "serve", "", "memory"), tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v, want an error containing %q", err, tc.want)
		}
	}
	twice := svc(func(*engine.Service) {})
	if _, err := engine.New(cfg(t, "nats://127.0.0.1:1", "serve", "", "memory"), twice, twice); err == nil ||
		!strings.Contains(err.Error(), `WithService("mine"): a service of that name is served already`) {
		t.Errorf("two services of one name: %v", err)
	}
	if _, err := engine.New(cfg(t, "nats://127.0.0.1:1", "serve", "", "memory"), engine.WithLogger(zap.NewNop())); err != nil {
		t.Errorf("good options: %v", err)
	}
}

// An embedder's service gets its errors mapped to the protocol's codes, the epoch it
// serves under in every call, and the metrics of a kernel service.
func TestEmbedderServiceErrorsEpochAndMetrics(t *testing.T) {
	srv := natstest.Start(t)
	errMine := errors.New("no such thing here")
	type req struct {
		protocol.Ctx
		Fail bool `json:"fail"`
	}
	type rep struct {
		Epoch uint64 `json:"epoch"`
		OK    bool   `json:"ok"`
	}
	svc := engine.Service{Name: "mine", Data: engine.SharedData(),
		Operations: map[string]primaries.Operation{"run": primaries.Handle(func(ctx context.Context, r *req) (rep, error) {
			if r.Fail {
				return rep{}, errMine
			}
			ep, ok := engine.CallEpoch(ctx)
			return rep{Epoch: ep, OK: ok}, nil
		})},
		Errors: engine.ErrorCodes{{Target: errMine, Code: protocol.NotFound}},
	}
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "jetstream"), engine.WithService(svc))
	load(t, e)
	c := client.NewService(transport(t, srv.URL()), "mine")
	ctx := context.Background()
	got, err := client.Call[rep](ctx, c, "run", req{})
	if err != nil || !got.OK || got.Epoch == 0 || got.Epoch != e.Epoch() {
		t.Fatalf("run = %+v %v; want the engine's epoch %d", got, err, e.Epoch())
	}
	_, err = client.Call[rep](ctx, c, "run", req{Fail: true})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.NotFound || !strings.Contains(pe.Message, "no such thing here") || pe.Retryable {
		t.Fatalf("a mapped error = %v, want NOT_FOUND with its message", err)
	}
	metrics := scrape(t, e)
	for _, want := range []string{
		`abi_engine_requests_total{code="OK",operation="run",service="mine"} 1`,
		`abi_engine_requests_total{code="NOT_FOUND",operation="run",service="mine"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// reportService streams a reply of the size its metadata asks for through the
// service's own transfer host, recording on which engine each stream ran; a stream
// asked to hold waits, once started, until release is closed.
func reportService(engineName string, ran chan<- string, started chan<- struct{}, release <-chan struct{}) engine.Service {
	type md struct {
		Size int  `json:"size"`
		Hold bool `json:"hold"`
	}
	type ping struct{ protocol.Ctx }
	return engine.Service{Name: "report", Data: engine.SharedData(),
		Operations: map[string]primaries.Operation{"ping": primaries.Handle(func(context.Context, *ping) (string, error) {
			return engineName, nil
		})},
		Transfers: map[string]sessions.Handler{"make": func(ctx context.Context, req sessions.TransferRequest) ([]byte, error) {
			var m md
			if err := json.Unmarshal(req.Metadata, &m); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgument, "metadata: %v", err)
			}
			ran <- engineName
			if m.Hold {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return pattern(m.Size), nil
		}},
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// openSubscribers counts the subscriptions at the broker that a transfer open of the
// report service reaches.
func openSubscribers(t *testing.T, srv *natstest.Server) int {
	t.Helper()
	sz, err := srv.Raw().Subsz(&server.SubszOptions{Subscriptions: true, Test: protocol.TransferOpenSubject(protocol.TransferPrefix("report"))})
	if err != nil {
		t.Fatal(err)
	}
	return len(sz.Subs)
}

// Two engines with an embedder's service that streams a 5 MiB reply through its own
// transfer host, across a handover: the stream in progress when the old engine
// releases the lease completes from it, streams opened once it stopped accepting open
// on the new engine, and no call fails, the service's own calls going on meanwhile.
func TestEmbedderStreamsAcrossAHandover(t *testing.T) {
	const size = 5 << 20
	srv := natstest.Start(t)
	ran := make(chan string, 4)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	slow := func(rollout string) *config.Config {
		c := cfg(t, srv.URL(), "serve", rollout, "jetstream")
		c.NATS.Engine.DrainSeconds = 60 // the drain waits for the held stream
		return c
	}
	a := newEngine(t, slow("v1"), engine.WithService(reportService("a", ran, started, release)))
	load(t, a)
	b := newEngine(t, slow("v2"), engine.WithService(reportService("b", ran, started, release)))
	load(t, b)
	if b.State() != engine.StateStandby {
		t.Fatalf("b is %s", b.State())
	}
	tr := transport(t, srv.URL())
	svc := client.NewService(tr, "report")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The service's own calls keep going throughout.
	var calls, fails atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			if _, err := client.Call[string](ctx, svc, "ping", struct{ protocol.Ctx }{}); err != nil {
				fails.Add(1)
				t.Errorf("ping: %v", err)
			}
			calls.Add(1)
		}
	}()
	defer func() { close(quit); <-done }()

	type result struct {
		b   []byte
		err error
	}
	first := make(chan result, 1)
	go func() {
		out, err := svc.Download(ctx, "make", map[string]any{"size": size, "hold": true})
		first <- result{out, err}
	}()
	testwait.Recv(t, started, 10*time.Second, "the first stream to start on a")
	if on := <-ran; on != "a" {
		t.Fatalf("the first stream ran on %s", on)
	}
	shut := make(chan error, 1)
	go func() { shut <- a.Shutdown(ctx) }()
	testwait.For(t, 20*time.Second, "b serving", func() bool { return b.State() == engine.StateServing })
	// a has ended its open subscription at the broker: new streams can only reach b.
	t.Logf("b serving")
	testwait.For(t, 20*time.Second, "a to stop accepting new streams", func() bool { return openSubscribers(t, srv) == 1 })
	n := calls.Load()
	t.Logf("a stopped accepting")
	out, err := svc.Download(ctx, "make", map[string]any{"size": size})
	if err != nil || !bytes.Equal(out, pattern(size)) {
		t.Fatalf("a stream opened after the handover: %d bytes, %v", len(out), err)
	}
	if on := <-ran; on != "b" {
		t.Fatalf("a stream opened after the handover ran on %s, want b", on)
	}
	select {
	case r := <-first:
		t.Fatalf("the held stream ended before it was released: %d bytes, %v", len(r.b), r.err)
	default:
	}
	t.Logf("second stream done")
	close(release)
	r := testwait.Recv(t, first, 30*time.Second, "the held stream to complete")
	if r.err != nil || !bytes.Equal(r.b, pattern(size)) {
		t.Fatalf("the stream in progress at the handover: %d bytes, %v", len(r.b), r.err)
	}
	t.Logf("first stream done")
	if err := testwait.Recv(t, shut, 30*time.Second, "a's handover"); err != nil {
		t.Fatalf("a's handover: %v", err)
	}
	testwait.For(t, 20*time.Second, "calls after the handover", func() bool { return calls.Load() > n+20 })
	if f := fails.Load(); f != 0 {
		t.Fatalf("%d failed calls across the handover", f)
	}
}
