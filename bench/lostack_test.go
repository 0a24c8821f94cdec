package bench_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	kvjs "github.com/abi-engine/engine/primaries/keyvalue/jetstream"
	"github.com/abi-engine/engine/protocol"
)

// ackLosing is a real JetStream context whose publishes are stored and whose acks are
// then lost: PublishMsg performs the write and returns the timeout a lost reply gives.
type ackLosing struct {
	js.JetStream
	publishes atomic.Int64
}

func (a *ackLosing) PublishMsg(ctx context.Context, m *nats.Msg, opts ...js.PublishOpt) (*js.PubAck, error) {
	a.publishes.Add(1)
	if _, err := a.JetStream.PublishMsg(ctx, m, opts...); err != nil {
		return nil, err
	}
	return nil, nats.ErrTimeout
}

// A write that committed but whose ack was lost has an unknown outcome (docs/design.md §5.8):
// the engine answers UNAVAILABLE, not retryable, the SDK does not send it again, and the
// bench records it as indefinite, so the linearizability checker lets it have happened.
// With every UNAVAILABLE retryable, the SDK resent the write for its whole retry window
// and the history recorded a failed write whose value a later read then found.
func TestALostAckIsNeitherResentNorCountedAsNotRun(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	real, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	lossy := &ackLosing{JetStream: real}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := kvjs.New(ctx, lossy, kvjs.Config{Storage: js.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	p, err := primaries.New(keyvalue.Service(store), primaries.Config{
		Conn: nc, InstanceID: "engine-lost-ack", MaxConcurrent: 4, LeaseValid: func() bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Spawn(e)
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Error(err)
		}
		<-e.PoisonCtx(context.Background(), pid).Done()
	})
	if err := p.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	tr, err := client.NewTransport(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}

	// The SDK's own call: one publish, no resend, an error that says it may have run.
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	err = client.NewKeyValue(tr).Set(cctx, "direct", []byte("v1"), 0)
	ccancel()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.Unavailable || pe.Retryable {
		t.Fatalf("set with a lost ack: %v, want UNAVAILABLE, not retryable", err)
	}
	if n, retries := lossy.publishes.Load(), tr.Counters().Snapshot().Retries; n != 1 || retries != 0 {
		t.Fatalf("the write was published %d times with %d retries, want once and none", n, retries)
	}
	if v, found, err := store.Get(ctx, "direct"); err != nil || !found || string(v) != "v1" {
		t.Fatalf("get after the lost ack: %q %v %v, want the write stored", v, found, err)
	}

	// The same through the bench: a set whose ack is lost, then a get of the same key.
	cfg := bench.DefaultConfig()
	cfg.Workload, cfg.Concurrency, cfg.Keys, cfg.Count, cfg.Duration = bench.WorkloadSetGet, 1, 1, 2, 0
	cfg.Timeout = 3 * time.Second
	rep, err := bench.Run(ctx, tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var set, get *bench.Op
	for i, op := range rep.History {
		switch {
		case op.Setup:
		case op.Kind == protocol.OpSet:
			set = &rep.History[i]
		case op.Kind == protocol.OpGet:
			get = &rep.History[i]
		}
	}
	if set == nil || get == nil {
		t.Fatalf("history %+v, want a set and a get", rep.History)
	}
	if set.Code != protocol.Unavailable || !set.Indefinite {
		t.Errorf("the set with a lost ack is recorded as %+v, want UNAVAILABLE and indefinite", *set)
	}
	if get.Failed() || !get.Found || get.Output != set.Input {
		t.Errorf("the get after it is %+v, want the value the set stored", *get)
	}
	if n := lossy.publishes.Load(); n != 2 {
		t.Errorf("%d publishes in all, want 2: each write sent once", n)
	}
	if res := check.Linearizable(rep.History, 10*time.Second); !res.Passed {
		t.Errorf("the history is not linearizable: %s %v", res.Summary, res.Details)
	}
}
