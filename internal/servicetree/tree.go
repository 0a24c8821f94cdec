// Package servicetree is an engine's part of a suture supervision tree and the order
// its end stops it in. suture stops a tree's children all at once, with no order; a
// Tree holds its services by name and Stop removes them one by one, each waited for,
// in the order it is given. A Stopper stops the parts of one service in the reverse
// of the order they were built (cockroach's Stopper).
package servicetree

import (
	"context"
	"sync"
	"time"

	"github.com/abi-engine/engine/supervisor"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// RemoveBound bounds the wait for one service to stop. Each service bounds its own
// stop; past them, it only keeps a service that hangs from holding the end for ever.
const RemoveBound = 30 * time.Second

// Tree is an engine's part of a supervision tree.
type Tree struct {
	sup *suture.Supervisor
	log *zap.Logger
	own bool // the engine serves sup: it was given none

	stopMu sync.Mutex // one stop at a time: a second waits for the first

	mu      sync.Mutex
	tokens  map[string]suture.ServiceToken
	stopped bool
	cancel  context.CancelFunc // ends sup, when it is the engine's own and started
	done    <-chan error
}

// New is the engine's part of sup, a tree its caller serves; with sup nil, a tree of
// the engine's own (Start serves it), whose services may take timeout to stop.
func New(sup *suture.Supervisor, log *zap.Logger, timeout time.Duration) *Tree {
	t := &Tree{sup: sup, log: log, tokens: map[string]suture.ServiceToken{}}
	if t.sup == nil {
		t.own = true
		t.sup = supervisor.NewTree("abi-engine", log, timeout)
	}
	return t
}

// Start serves the engine's own tree; a tree given to New is its caller's.
func (t *Tree) Start() {
	if !t.own {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := t.sup.ServeBackground(ctx)
	t.mu.Lock()
	t.cancel, t.done = cancel, done
	t.mu.Unlock()
}

// Add puts svc in the tree under name; the tree starts it. A tree stopped already (an
// end while the engine loaded) stops svc at once instead, so what it holds is let go.
func (t *Tree) Add(name string, svc suture.Service) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = svc.Serve(ctx)
		return
	}
	t.tokens[name] = t.sup.Add(svc)
}

// Remove stops the service name and waits until it has stopped. It is a no-op for a
// service the tree does not hold (never added, or removed already).
func (t *Tree) Remove(name string) {
	t.mu.Lock()
	tok, ok := t.tokens[name]
	delete(t.tokens, name)
	t.mu.Unlock()
	if !ok {
		return
	}
	if err := t.sup.RemoveAndWait(tok, RemoveBound); err != nil {
		t.log.Warn("stopping a service", zap.String("service", name), zap.Error(err))
		return
	}
	t.log.Debug("service stopped", zap.String("service", name))
}

// Stop stops every service in order, then the engine's own tree; a service added
// after it is stopped at once. A second call waits until the first is done.
func (t *Tree) Stop(order []string) {
	t.stopMu.Lock()
	defer t.stopMu.Unlock()
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	for _, name := range order {
		t.Remove(name)
	}
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.cancel = nil
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// OnStop is a service that holds something until its ctx ends, then stops it; Stop
// must be idempotent (suture serves a service again after a panic).
type OnStop struct {
	Name string
	Stop func()
}

func (s OnStop) String() string { return s.Name }

// Serve implements suture.Service.
func (s OnStop) Serve(ctx context.Context) error {
	<-ctx.Done()
	s.Stop()
	return ctx.Err()
}
