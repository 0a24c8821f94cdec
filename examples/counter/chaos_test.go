package counter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/examples/counter"
)

// This file is how a project wires the chaos harness into its own CI (docs/chaos.md
// "In your own CI"): an engine constructor with its service, a workload of its calls
// with a model for the linearizability checker, and EngineProcess in TestMain so the
// process scenarios run the engine in child processes of the test binary.

func TestMain(m *testing.M) {
	chaos.EngineProcess(newEngine)
	os.Exit(m.Run())
}

// newEngine is the engine with the counter service on the run's broker.
func newEngine(cfg *config.Config, opts ...engine.Option) (*engine.Engine, error) {
	nc, err := nats.Connect(cfg.NATS.URL, nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := counter.OpenJetStream(ctx, js, "CHAOS_COUNTERS")
	if err != nil {
		nc.Close()
		return nil, err
	}
	e, err := engine.New(cfg, append(opts, engine.WithService(counter.Service(store)))...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	go func() { <-e.Done(); nc.Close() }()
	return e, nil
}

// counters is how many counters the workload spreads its calls over.
const counters = 16

// workload increments and reads counters, half and half.
type workload struct{}

func (workload) Name() string { return fmt.Sprintf("counter incr and get over %d counters", counters) }

func (workload) Call(ctx context.Context, tr *client.Transport, _ int, rng *rand.Rand) bench.Op {
	svc := client.NewService(tr, counter.Name)
	name := fmt.Sprintf("c%d", rng.IntN(counters))
	op := bench.Op{Kind: counter.OpGet, Key: name}
	var req any = counter.GetRequest{Name: name}
	if rng.IntN(2) == 0 {
		by := 1 + rng.Int64N(3)
		op.Kind, op.Input = counter.OpIncr, uint64(by)
		req = counter.IncrRequest{Name: name, By: by}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	op.Invoke = time.Now()
	reply, err := svc.Request(ctx, op.Kind, req)
	op.Complete = time.Now()
	if err != nil {
		bench.Failure(&op, err)
		return op
	}
	op.Instance = reply.Instance
	var r counter.Reply
	if err := json.Unmarshal(reply.Data, &r); err != nil {
		bench.Failure(&op, err)
		return op
	}
	op.Output, op.Found = uint64(r.Value), true
	return op
}

// unknown is the output of an increment whose outcome is unknown.
type unknown struct{}

// Model is one counter per key: an increment by n returns the value before it plus n,
// a get the value; an increment of unknown outcome may have added n or not.
func (workload) Model() *check.Model {
	type in struct {
		kind string
		by   int64
	}
	return &check.Model{
		Model: porcupine.Model{
			Init: func() any { return int64(0) },
			Step: func(state, input, output any) (bool, any) {
				v, i := state.(int64), input.(in)
				if _, open := output.(unknown); open {
					return true, v + i.by
				}
				got := output.(int64)
				if i.kind == counter.OpIncr {
					return got == v+i.by, got
				}
				return got == v, v
			},
			DescribeOperation: func(input, output any) string {
				i := input.(in)
				if _, open := output.(unknown); open {
					return fmt.Sprintf("%s %d -> ?", i.kind, i.by)
				}
				return fmt.Sprintf("%s %d -> %d", i.kind, i.by, output.(int64))
			},
		},
		Input:   func(op bench.Op) any { return in{kind: op.Kind, by: int64(op.Input)} },
		Output:  func(op bench.Op) any { return int64(op.Output) },
		Unknown: unknown{},
		Reads:   []string{counter.OpGet},
	}
}

// logWriter sends the harness's progress lines to the test log.
type logWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The chaos harness runs rolling-deploy and pause-holder against the counter service,
// its engine in child processes of this test binary, with the counter workload and its
// checker: no failed call across the handovers, the resumed holder answers nothing,
// and the counters' history is linearizable.
func TestChaosAgainstTheCounterService(t *testing.T) {
	for _, name := range []string{"rolling-deploy", "pause-holder"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := chaos.Run(ctx, name, chaos.Options{Seed: 20260101, Engine: newEngine, Workload: workload{}, Log: &logWriter{t: t}})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			_ = rep.Table(&b)
			if !rep.Passed {
				t.Fatalf("%s failed against the counter service:\n%s", name, b.String())
			}
			names := map[string]bool{}
			for _, c := range rep.Checks {
				names[c.Name] = true
			}
			if !names["linearizable"] || rep.Traffic.Kinds[counter.OpIncr].Ops == 0 {
				t.Fatalf("the counter workload was not judged:\n%s", b.String())
			}
			t.Logf("%s passed in %s: %d counter calls\n%s", name, rep.Elapsed.Round(time.Millisecond), rep.Traffic.Ops, b.String())
		})
	}
}

// The counter checker fails a history with a lost update: two increments by 1 that
// both returned 1, the second invoked after the first returned.
func TestCounterCheckerCatchesALostUpdate(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	incr := func(worker, from, to int, got uint64) bench.Op {
		return bench.Op{Worker: worker, Kind: counter.OpIncr, Key: "c", Input: 1, Output: got, Found: true, Invoke: at(from), Complete: at(to)}
	}
	m := *workload{}.Model()
	if r := check.LinearizableModel([]bench.Op{incr(0, 0, 10, 1), incr(1, 20, 30, 2)}, m, time.Second); !r.Passed {
		t.Fatalf("a good history failed: %+v", r)
	}
	if r := check.LinearizableModel([]bench.Op{incr(0, 0, 10, 1), incr(1, 20, 30, 1)}, m, time.Second); r.Passed {
		t.Fatalf("a lost update passed: %+v", r)
	}
	// An increment of unknown outcome may have counted: a later read of 2 is explained.
	open := incr(0, 0, 10, 0)
	open.Code, open.Indefinite, open.Found = "UNAVAILABLE", true, false
	read := bench.Op{Worker: 1, Kind: counter.OpGet, Key: "c", Output: 2, Found: true, Invoke: at(40), Complete: at(50)}
	if r := check.LinearizableModel([]bench.Op{open, incr(1, 20, 30, 2), read}, m, time.Second); !r.Passed {
		t.Fatalf("an increment of unknown outcome was not allowed to count: %+v", r)
	}
}
