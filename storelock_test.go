package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/supervisor"
)

// TestTwoEnginesInOneProcessShareNoStore: two engines of one process on one store
// directory with the embedded broker on a random port: the second finds the first's
// broker through the store directory's lock and is refused naming it and the lock
// file; once the first has shut down, its lock is let go and a third engine serves on
// the same store.
func TestTwoEnginesInOneProcessShareNoStore(t *testing.T) {
	store := t.TempDir()
	embedded := func() *engine.Engine {
		c := cfg(t, "", "serve", "", "jetstream")
		c.NATS.Embedded.Listen = "127.0.0.1:0"
		c.NATS.Embedded.StoreDir = store
		return newEngine(t, c)
	}
	first := embedded()
	load(t, first)

	second := embedded()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := second.Load(ctx)
	var already *lease.AlreadyServingError
	if !errors.As(err, &already) || already.Holder.InstanceID != first.InstanceID() {
		t.Fatalf("the second Load = %v, want refused naming %s", err, first.InstanceID())
	}
	if !strings.Contains(err.Error(), filepath.Join(store, supervisor.LockFile)) {
		t.Errorf("%q does not name the lock file", err)
	}

	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	third := embedded()
	load(t, third)
	if third.State() != engine.StateServing {
		t.Fatalf("the third engine: %s, want serving", third.State())
	}
}
