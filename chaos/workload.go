package chaos

import (
	"context"
	"math/rand/v2"
	"sync"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/config"
)

// Workload is the traffic of a run against a service of the embedder's own, in place
// of the kernel's keyvalue workload (Options.Workload): the calls to make, and how the
// linearizability checker models them. Every other checker (zero failures across
// handovers, every call answered after a takeover, no two engines answering at once,
// no leaks) judges its calls as it judges keyvalue's, from what Call records.
type Workload interface {
	// Name says what the traffic is, in the report.
	Name() string
	// Call makes one call through tr as worker (0 to Options.Concurrency-1), drawing
	// what it does from rng (the worker's own, seeded from Options.Seed), and returns
	// it as it happened: Kind (the operation), Key (what it is on: the checker's
	// partition), Invoke and Complete, the engine instance that answered, what the
	// model needs of its request and reply (Input, Output, Found, Applied), and for a
	// failure bench.Failure's Code, Err, Instance and Indefinite. Call returns when ctx
	// ends; calls in flight when the traffic stops complete.
	Call(ctx context.Context, tr *client.Transport, worker int, rng *rand.Rand) bench.Op
	// Model is the linearizability checker's model of the calls, nil for none (the
	// run then has no linearizable check).
	Model() *check.Model
}

// EngineFunc builds an engine of the embedder's own (Options.Engine) from the
// configuration the harness chose and the options it needs (its logger, its probe
// job, fail points): typically engine.New(cfg, append(opts, engine.WithService(...))...).
// The harness loads it, hands it over and shuts it down. Its services must keep their
// data where every engine of the run reaches it (engine.SharedData): the scenarios hand
// over between rollouts.
type EngineFunc func(cfg *config.Config, opts ...engine.Option) (*engine.Engine, error)

// newEngine builds an in-process engine: the embedder's (Options.Engine) or ours.
func (h *harness) newEngine(cfg *config.Config, opts ...engine.Option) (*engine.Engine, error) {
	if h.opts.Engine != nil {
		return h.opts.Engine(cfg, opts...)
	}
	return engine.New(cfg, opts...)
}

// runWorkload drives w with opts.Concurrency workers, each recording every call in
// rec, until stop closes; it returns once every worker has.
func runWorkload(ctx context.Context, w Workload, tr *client.Transport, opts Options, rec *bench.Recorder, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for i := range opts.Concurrency {
		rng := rand.New(rand.NewPCG(uint64(opts.Seed), uint64(i)+1))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				op := w.Call(ctx, tr, i, rng)
				op.Worker = i
				op.Interrupted = op.Interrupted || (op.Failed() && ctx.Err() != nil)
				rec.Record(op)
			}
		})
	}
	wg.Wait()
}
