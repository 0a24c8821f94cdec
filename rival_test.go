package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
)

// serveKeyValue adds a micro service named keyvalue on a connection of its own, as an
// engine whose lease this one cannot see (another JetStream domain) would; meta is its
// metadata.
func serveKeyValue(t *testing.T, url string, meta map[string]string) {
	t.Helper()
	nc := natstest.Connect(t, url)
	svc, err := micro.AddService(nc, micro.Config{Name: "keyvalue", Version: "9.9.9", Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	// Its subscriptions are at the broker before an engine asks.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
}

// TestRivalIsRefusedBeforeTheClaim: an engine that finds another engine answering
// keyvalue while the lease it sees names nobody is refused before it claims, naming
// that engine and the setting to fix; it writes no lease. An auto engine becomes a
// client. A service that carries no instance id (a Python engine) is let be.
func TestRivalIsRefusedBeforeTheClaim(t *testing.T) {
	srv := natstest.Start(t)
	const rival = "0123456789abcdef0123456789abcdef"
	serveKeyValue(t, srv.URL(), map[string]string{"instance_id": rival})

	b := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Load(ctx)
	var re *engine.RivalError
	if !errors.As(err, &re) || re.Instance != rival {
		t.Fatalf("Load = %v, want a RivalError naming %s", err, rival)
	}
	var as *lease.AlreadyServingError
	if !errors.As(err, &as) {
		t.Fatalf("a RivalError is not an AlreadyServingError (exit 3): %v", err)
	}
	for _, want := range []string{rival, "keyvalue", "9.9.9", "nats.jetstream.domain", "lease there is free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if r := leaseRecord(t, srv.URL()); !r.Free() {
		t.Fatalf("a refused engine wrote the lease: %+v", r)
	}

	c := newEngine(t, cfg(t, srv.URL(), "auto", "", "memory"))
	load(t, c)
	if c.Role() != config.RoleClient {
		t.Fatalf("auto next to a rival: role %s, want client", c.Role())
	}
}

// TestServiceWithoutInstanceIsNoRival: a keyvalue service with no instance id cannot be
// told from the lease's holder, and does not stop an engine from serving.
func TestServiceWithoutInstanceIsNoRival(t *testing.T) {
	srv := natstest.Start(t)
	serveKeyValue(t, srv.URL(), nil)
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	load(t, e)
	if e.State() != engine.StateServing {
		t.Fatalf("state %s, want serving", e.State())
	}
}

// TestRivalWhileServingEndsOneEngine: a serving engine that comes to see a rival (one
// that started at the same moment, or of a version that does not check at start) ends
// with a RivalError, releasing its lease: at once when its instance id is the greater,
// and after the grace otherwise, since a rival that never stops must not keep both
// serving.
func TestRivalWhileServingEndsOneEngine(t *testing.T) {
	for _, rival := range []string{"00000000000000000000000000000000", "ffffffffffffffffffffffffffffffff"} {
		t.Run(rival[:1], func(t *testing.T) {
			srv := natstest.Start(t)
			c := cfg(t, srv.URL(), "serve", "", "memory")
			c.NATS.Engine.LeaseSeconds = 1
			e := newEngine(t, c)
			load(t, e)
			serveKeyValue(t, srv.URL(), map[string]string{"instance_id": rival})
			select {
			case <-e.Done():
			case <-time.After(20 * time.Second):
				t.Fatalf("the engine still %s next to a rival", e.State())
			}
			var re *engine.RivalError
			if err := e.Err(); !errors.As(err, &re) || re.Instance != rival {
				t.Fatalf("the engine ended with %v, want a RivalError naming %s", err, rival)
			}
			if r := leaseRecord(t, srv.URL()); !r.Free() {
				t.Fatalf("the engine that yielded kept the lease: %+v", r)
			}
		})
	}
}
