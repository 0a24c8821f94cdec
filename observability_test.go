package engine_test

import (
	"github.com/abi-engine/engine/internal/testwait"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/supervisor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
	testwait.For(t, 10*time.Second, "three panics in /status", func() bool {
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

func scrape(t *testing.T, e *engine.Engine) string {
	t.Helper()
	s := httptest.NewServer(supervisor.Handler(e, e.Registry()))
	defer s.Close()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestMetricsCarryTheGoAndProcessCollectors is issue 10 item 5: /metrics has the Go
// runtime and process collectors next to the engine's own, also on an embedder's
// registry that holds them already.
func TestMetricsCarryTheGoAndProcessCollectors(t *testing.T) {
	own, err := engine.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	shared := prometheus.NewRegistry()
	shared.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	embedded, err := engine.New(nil, engine.WithRegistry(shared))
	if err != nil {
		t.Fatalf("New on a registry with the Go collectors: %v", err)
	}
	for name, e := range map[string]*engine.Engine{"own registry": own, "embedder's registry": embedded} {
		body := scrape(t, e)
		for _, want := range []string{"go_goroutines ", "go_memstats_alloc_bytes ", "process_cpu_seconds_total ", "process_open_fds ", `abi_engine_state{state="idle"} 1`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: /metrics lacks %q", name, want)
			}
		}
	}
	if n := strings.Count(scrape(t, embedded), "\ngo_goroutines "); n != 1 {
		t.Fatalf("go_goroutines scraped %d times from the embedder's registry, want once", n)
	}
}
