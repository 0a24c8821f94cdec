package engine_test

import (
	"strings"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestActorPanicsAreLoggedCountedAndShown is issue 10 item 4: each recovered actor
// panic is logged once with the actor and its stack, counted by actor kind, and counted
// in /status; the engine keeps serving.
func TestActorPanicsAreLoggedCountedAndShown(t *testing.T) {
	srv := natstest.Start(t)
	core, logs := observer.New(zap.InfoLevel)
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"), engine.WithLogger(zap.New(core)))
	load(t, e)
	for _, target := range []string{"renewer", "primary:keyvalue", "primary:object_storage"} {
		if err := e.InjectPanic(target); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "three panics in /status", func() bool {
		return e.Status().(engine.Status).ActorPanics == 3
	})
	panics := logs.FilterMessage("an actor panicked: it was restarted in place").All()
	if len(panics) != 3 {
		t.Fatalf("%d panic log lines, want one per panic", len(panics))
	}
	for _, l := range panics {
		f := l.ContextMap()
		if !strings.Contains(f["actor"].(string), "/") || !strings.Contains(f["stack"].(string), "Recover") ||
			!strings.Contains(f["reason"].(string), "injected by InjectPanic") {
			t.Errorf("panic logged as %v", f)
		}
	}
	reg := e.Registry()
	for kind, want := range map[string]float64{"renewer": 1, "primary": 2} {
		c, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := -1.0
		for _, mf := range c {
			if mf.GetName() != "abi_engine_actor_panics_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == kind {
					got = m.GetCounter().GetValue()
				}
			}
		}
		if got != want {
			t.Errorf("abi_engine_actor_panics_total{actor=%q} = %v, want %v", kind, got, want)
		}
	}
	if e.State() != engine.StateServing {
		t.Fatalf("state %s after the panics", e.State())
	}
}
