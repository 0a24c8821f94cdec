package engine_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func serviceNames(sup *suture.Supervisor) []string {
	var names []string
	for _, s := range sup.Services() {
		names = append(names, fmt.Sprint(s))
	}
	slices.Sort(names)
	return names
}

// TestOneTreeHoldsTheEngineAndStopsItInOrder: everything an engine starts (the embedded
// broker, its connections, its actors, its backends) is a service of the supervision
// tree it is given, beside what its caller keeps there; its end removes them one by
// one, in order — the actors, the backends, the connections, the broker last — and
// leaves the caller's services running.
func TestOneTreeHoldsTheEngineAndStopsItInOrder(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	c := cfg(t, "", "serve", "", "memory")
	c.NATS.Embedded.Listen = "127.0.0.1:0"
	c.NATS.Embedded.StoreDir = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	sup := suture.NewSimple("test")
	ctx, cancel := context.WithCancel(context.Background())
	treeDone := sup.ServeBackground(ctx)
	defer func() {
		cancel()
		<-treeDone
	}()
	callers := sup.Add(idle{})
	e := newEngine(t, c, engine.WithLogger(zap.New(core)), engine.WithSupervisor(sup))
	load(t, e)
	want := []string{"actors", "backends", "callers", "control", "embedded nats-server", "nats lease", "nats service", "session budget"}
	if got := serviceNames(sup); !slices.Equal(got, want) {
		t.Fatalf("the tree holds %v, want %v", got, want)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := e.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if got := serviceNames(sup); !slices.Equal(got, []string{"callers"}) {
		t.Fatalf("after Shutdown the tree holds %v, want only the caller's service", got)
	}
	var order []string
	for _, l := range logs.FilterMessage("service stopped").All() {
		order = append(order, fmt.Sprint(l.ContextMap()["service"]))
	}
	if want := []string{"control", "actors", "backends", "budget", "service", "lease", "broker"}; !slices.Equal(order, want) {
		t.Fatalf("the engine's services stopped in the order %v, want %v", order, want)
	}
	if err := sup.RemoveAndWait(callers, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// idle is a caller's service: it runs until its tree stops it.
type idle struct{}

func (idle) String() string { return "callers" }

func (idle) Serve(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}
