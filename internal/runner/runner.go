// Package runner is the run of an engine process, written once: `abi-engine run` and
// the chaos harness's engine processes both call Run. Run serves the process's
// supervision tree with the HTTP endpoints and the signal handler in it, loads the
// engine (whose services join the tree), and returns when the engine has handed over,
// was refused, or ended on its own, with the process's exit code in its error
// (ExitError, ExitCode).
//
// Signals: the first SIGTERM, SIGINT or SIGHUP cancels a Load under way, or hands
// over (engine Shutdown); a second cuts the handover short and stops at once.
package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/supervisor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// Engine is what Run needs of an engine (*engine.Engine).
type Engine interface {
	supervisor.Reporter
	Load(ctx context.Context) error
	Shutdown(ctx context.Context) error
	Done() <-chan struct{}
	Err() error
	Registry() *prometheus.Registry
	InstanceID() string
}

// steppable is an engine that abi-engine step-down can hand over (*engine.Engine).
type steppable interface {
	SteppedDown() bool
	StepDownStay() bool
}

// Process is the process around the engine that Run serves.
type Process struct {
	// Tree is the process's supervision tree: the engine's services are in it
	// (engine.WithSupervisor); Run adds the HTTP endpoints and the signal handler and
	// serves it until it returns.
	Tree *suture.Supervisor
	// Log is the process's logger.
	Log *zap.Logger
	// Version is logged as the process starts.
	Version string
	// Signals builds the service that calls first on the first stop request and
	// second on every later one; nil is supervisor.Signals (SIGTERM, SIGINT, SIGHUP).
	Signals func(first, second func()) suture.Service
	// Ended, optional, may name more of why the engine ended on its own (err) before
	// Run returns it.
	Ended func(ctx context.Context, err error) error
	// SteppedDown, optional, is told that the engine ended handing over to abi-engine
	// step-down, and whether the step-down asked the process to stay as a standby.
	SteppedDown func(stay bool)
}

// Run serves p's tree, loads eng in it and waits for its end (see the package doc).
// Every end of the engine has removed its services from the tree, in order, before
// Run stops the tree.
func Run(ctx context.Context, cfg *config.Config, eng Engine, p Process) error {
	log := p.Log
	signals := p.Signals
	if signals == nil {
		signals = func(first, second func()) suture.Service {
			return &supervisor.Signals{OnFirst: first, OnSecond: second}
		}
	}
	stop := newStopRequests()
	if cfg.HTTP.Listen != "" {
		// Up before Load: /healthz answers at once, and the engine says idle and not
		// ready until it has loaded and serves or stands by. Bound here, so an address
		// that cannot be served stops the start before it touches the broker.
		h, err := supervisor.ListenHTTP(cfg.HTTP.Listen, supervisor.Handler(eng, eng.Registry(), supervisor.WithPprof(cfg.HTTP.Pprof)), log)
		if err != nil {
			return Runtime(fmt.Errorf("cannot serve /healthz, /readyz, /status and /metrics on %s (http.listen): %w", cfg.HTTP.Listen, err))
		}
		p.Tree.Add(h)
	}
	p.Tree.Add(signals(stop.onFirst, stop.onSecond))
	treeCtx, cancelTree := context.WithCancel(context.WithoutCancel(ctx))
	treeDone := p.Tree.ServeBackground(treeCtx)
	defer func() {
		cancelTree()
		<-treeDone
	}()

	log.Info("abi-engine starting", zap.String("version", p.Version), zap.String("instance_id", eng.InstanceID()),
		zap.String("role", string(cfg.NATS.Engine.Role)), zap.String("rollout_id", cfg.NATS.Engine.RolloutID),
		zap.String("config", cfg.Path()))

	// A stop requested while the engine loads (a claim can watch the holder for a lease
	// period) cancels the load.
	loadCtx, cancelLoad := context.WithCancel(ctx)
	stopWatch := whenClosed(stop.first, cancelLoad)
	err := eng.Load(loadCtx)
	stopWatch()
	cancelLoad()
	if err != nil {
		var already *lease.AlreadyServingError
		switch {
		case errors.As(err, &already), errors.Is(err, supervisor.ErrStoreLocked):
			// The lock of the store directory is another engine's: one that serves, or
			// is about to, on this host.
			return &ExitError{Code: ExitServing, Err: err}
		case closed(stop.first):
			log.Info("stopped while loading", zap.Error(err))
			return nil
		}
		return Runtime(fmt.Errorf("load the engine: %w", err))
	}
	log.Info("abi-engine loaded")

	select {
	case <-stop.first:
	case <-eng.Done():
		if err := eng.Err(); err != nil {
			if p.Ended != nil {
				err = p.Ended(ctx, err)
			}
			return endedError(err)
		}
		if sd, ok := eng.(steppable); ok && sd.SteppedDown() {
			// abi-engine step-down ran the handover: a clean end.
			stay := sd.StepDownStay()
			if p.SteppedDown != nil {
				p.SteppedDown(stay)
			}
			log.Info("stepped down: handover complete", zap.Bool("stay_as_standby", stay))
			return nil
		}
		return Runtime(errors.New("the engine stopped without being asked to"))
	}
	log.Info("stop requested: handing over (a second signal stops at once)")
	start := time.Now()
	shutdownCtx, cancelShutdown := context.WithCancel(context.WithoutCancel(ctx))
	stopWatch = whenClosed(stop.second, cancelShutdown)
	err = eng.Shutdown(shutdownCtx)
	stopWatch()
	cancelShutdown()
	switch {
	case err != nil && closed(stop.second):
		return Runtime(fmt.Errorf("stopped at once on a second signal, handover cut short: %w", err))
	case err != nil:
		return Runtime(fmt.Errorf("handover: %w", err))
	}
	log.Info("handover complete: exiting", zap.Duration("took", time.Since(start)))
	return nil
}

// endedError is the exit of an engine that ended on its own: ExitServing when another
// engine serves (a standby that an engine of its own rollout beat to the released
// lease, named as a refusal at start names it), ExitRuntime otherwise (lost lease,
// standby timeout).
func endedError(err error) error {
	var already *lease.AlreadyServingError
	if errors.As(err, &already) {
		return &ExitError{Code: ExitServing, Err: err}
	}
	return Runtime(err)
}

// stopRequests records the stop requests (signals) as closed channels.
type stopRequests struct {
	first, second         chan struct{}
	firstOnce, secondOnce sync.Once
}

func newStopRequests() *stopRequests {
	return &stopRequests{first: make(chan struct{}), second: make(chan struct{})}
}

func (s *stopRequests) onFirst()  { s.firstOnce.Do(func() { close(s.first) }) }
func (s *stopRequests) onSecond() { s.secondOnce.Do(func() { close(s.second) }) }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// whenClosed cancels when ch closes, until stop is called; stop waits for the
// goroutine it started.
func whenClosed(ch <-chan struct{}, cancel context.CancelFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ch:
			cancel()
		case <-done:
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
