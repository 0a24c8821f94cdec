package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/abi-engine/engine/internal/testwait"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/lease"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// fakeEngine stands in for *engine.Engine, so the tests of `run` drive every way an
// engine can end without a broker.
type fakeEngine struct {
	load     func(ctx context.Context) error
	shutdown func(ctx context.Context) error

	loadCalled     chan struct{}
	shutdownCalled chan struct{}
	done           chan struct{}
	reg            *prometheus.Registry

	mu    sync.Mutex
	ready bool // as an engine: once Load has returned
	err   error
	end   sync.Once
}

func newFakeEngine() *fakeEngine {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "abi_engine_fake_total", Help: "test"}))
	return &fakeEngine{
		load:           func(context.Context) error { return nil },
		shutdown:       func(context.Context) error { return nil },
		loadCalled:     make(chan struct{}),
		shutdownCalled: make(chan struct{}),
		done:           make(chan struct{}),
		reg:            reg,
	}
}

func (f *fakeEngine) Load(ctx context.Context) error {
	close(f.loadCalled)
	err := f.load(ctx)
	f.mu.Lock()
	f.ready = err == nil
	f.mu.Unlock()
	return err
}

func (f *fakeEngine) Shutdown(ctx context.Context) error {
	close(f.shutdownCalled)
	err := f.shutdown(ctx)
	f.endWith(nil)
	return err
}

// endWith ends the engine, as a lost lease or a standby timeout does.
func (f *fakeEngine) endWith(err error) {
	f.end.Do(func() {
		f.mu.Lock()
		f.err = err
		f.ready = false
		f.mu.Unlock()
		close(f.done)
	})
}

func (f *fakeEngine) Done() <-chan struct{} { return f.done }
func (f *fakeEngine) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
func (f *fakeEngine) Healthy() error { return nil }
func (f *fakeEngine) Ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}
func (f *fakeEngine) Status() any                    { return map[string]string{"state": "fake"} }
func (f *fakeEngine) Registry() *prometheus.Registry { return f.reg }
func (f *fakeEngine) InstanceID() string             { return responderID }

// testSignals delivers the stop requests a test sends on fire, as SIGTERM would.
type testSignals struct {
	first, second func()
	fire          <-chan struct{}
}

func (s *testSignals) String() string { return "signals" }

func (s *testSignals) Serve(ctx context.Context) error {
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.fire:
			if n == 0 {
				s.first()
			} else {
				s.second()
			}
		}
	}
}

// runHarness runs `abi-engine run` in-process with a fake engine.
type runHarness struct {
	eng    *fakeEngine
	fire   chan struct{}
	cfg    chan *config.Config
	code   chan int
	stderr *testproc.Output
}

func startRun(t *testing.T, eng *fakeEngine, env map[string]string, args ...string) *runHarness {
	t.Helper()
	c, _, stderr := cliFor(t, env)
	h := &runHarness{eng: eng, fire: make(chan struct{}), cfg: make(chan *config.Config, 1), code: make(chan int, 1), stderr: stderr}
	c.newEngine = func(cfg *config.Config, _ *zap.Logger, version string, _ *suture.Supervisor, _ *failpoint.Set) (runnableEngine, error) {
		if version != c.version {
			t.Errorf("engine built with version %q, want %q", version, c.version)
		}
		h.cfg <- cfg
		return eng, nil
	}
	c.signals = func(first, second func()) suture.Service {
		return &testSignals{first: first, second: second, fire: h.fire}
	}
	go func() { h.code <- c.execute(context.Background(), append([]string{"run"}, args...)) }()
	t.Cleanup(func() {
		select {
		case <-h.code:
		case <-time.After(10 * time.Second):
			t.Error("run did not return")
		}
	})
	return h
}

func (h *runHarness) signal(t *testing.T) {
	t.Helper()
	select {
	case h.fire <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the signal service does not take signals")
	}
}

func (h *runHarness) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-h.code:
		h.code <- code // for the cleanup
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("run did not return; stderr:\n%s", h.stderr)
		return 0
	}
}

func remoteConfig(t *testing.T, extra string) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "abi-engine.yaml", "nats: {url: \"nats://127.0.0.1:1\"}\nhttp: {listen: \"\"}\n"+extra)
}

func TestRunHandsOverOnFirstSignal(t *testing.T) {
	eng := newFakeEngine()
	h := startRun(t, eng, map[string]string{"ABI_ROLLOUT_ID": "r2", "ABI_NATS_URL": "nats://env:4222"},
		"--config", remoteConfig(t, ""), "--nats", "nats://flag:4222", "--role", "auto")
	cfg := <-h.cfg
	if cfg.NATS.URL != "nats://flag:4222" || cfg.NATS.Engine.Role != config.RoleAuto || cfg.NATS.Engine.RolloutID != "r2" {
		t.Errorf("engine built with nats.url %q, role %q, rollout %q; want the flags' and the environment's",
			cfg.NATS.URL, cfg.NATS.Engine.Role, cfg.NATS.Engine.RolloutID)
	}
	testwait.Closed(t, eng.loadCalled, 10*time.Second, "Load is called")
	h.signal(t)
	testwait.Closed(t, eng.shutdownCalled, 10*time.Second, "the first signal calls Shutdown")
	if code := h.exit(t); code != exitOK {
		t.Fatalf("exit %d after a handover, want 0; stderr:\n%s", code, h.stderr)
	}
	// Logs are JSON, one object a line, and say what happened.
	lines := strings.Split(strings.TrimSpace(h.stderr.String()), "\n")
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil || m["level"] == nil || m["ts"] == nil {
			t.Errorf("log line is not a zap JSON object: %q", l)
		}
	}
	wantContains(t, "logs", h.stderr.String(), "abi-engine starting", "handing over", "handover complete")
}

func TestRunSecondSignalStopsAtOnce(t *testing.T) {
	eng := newFakeEngine()
	eng.shutdown = func(ctx context.Context) error {
		<-ctx.Done() // a handover that would wait for drain_seconds
		return ctx.Err()
	}
	h := startRun(t, eng, nil, "--config", remoteConfig(t, ""), "--log-format", "console")
	testwait.Closed(t, eng.loadCalled, 10*time.Second, "Load is called")
	h.signal(t)
	testwait.Closed(t, eng.shutdownCalled, 10*time.Second, "the first signal calls Shutdown")
	h.signal(t)
	if code := h.exit(t); code != exitRuntime {
		t.Fatalf("exit %d after a second signal, want 1; stderr:\n%s", code, h.stderr)
	}
	wantContains(t, "stderr", h.stderr.String(), "INFO", "second signal", "handover cut short", "context canceled")
	if strings.Contains(h.stderr.String(), `{"level"`) {
		t.Errorf("--log-format console still logs JSON:\n%s", h.stderr)
	}
}

func TestRunAnotherEngineServes(t *testing.T) {
	eng := newFakeEngine()
	holder := lease.Holder{InstanceID: responderID, Host: "old-pod", PID: 7, Version: "v1", StartedAt: "2026-05-01T10:00:00Z"}
	eng.load = func(context.Context) error {
		return fmt.Errorf("engine: claim: %w", &lease.AlreadyServingError{Holder: holder})
	}
	h := startRun(t, eng, nil, "--config", remoteConfig(t, ""))
	if code := h.exit(t); code != exitServing {
		t.Fatalf("exit %d, want 3; stderr:\n%s", code, h.stderr)
	}
	wantContains(t, "stderr", h.stderr.String(), "another engine already serves this NATS account: "+holder.String())
}

func TestRunEngineEndsOnItsOwn(t *testing.T) {
	twin := lease.Holder{InstanceID: responderID, Host: "new-pod", PID: 8, Version: "v2", RolloutID: "v2", StartedAt: "2026-05-01T10:00:00Z"}
	for _, tc := range []struct {
		name string
		err  error
		code int
		want string
	}{
		{"lost", &lease.LostError{Holder: lease.Holder{InstanceID: responderID, Host: "thief"}}, exitRuntime, "another engine took the engine lease"},
		{"standby timed out", &lease.StandbyTimeoutError{Holder: lease.Holder{Host: "old"}, Timeout: 15 * time.Minute}, exitRuntime, "no handover within 15m0s"},
		// A standby that an engine of its own rollout beat to the released lease ends as
		// a refusal at start does: exit 3, naming the holder.
		{"standby beaten to the lease", &lease.AlreadyServingError{Holder: twin}, exitServing,
			"another engine already serves this NATS account: " + twin.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newFakeEngine()
			h := startRun(t, eng, nil, "--config", remoteConfig(t, ""))
			testwait.Closed(t, eng.loadCalled, 10*time.Second, "Load is called")
			eng.endWith(tc.err)
			if code := h.exit(t); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, h.stderr)
			}
			wantContains(t, "stderr", h.stderr.String(), "abi-engine: "+tc.want)
		})
	}
}

func TestRunLoadFails(t *testing.T) {
	eng := newFakeEngine()
	eng.load = func(context.Context) error { return errors.New("open the lease: nats: timeout") }
	h := startRun(t, eng, nil, "--config", remoteConfig(t, ""))
	if code := h.exit(t); code != exitRuntime {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, h.stderr)
	}
	wantContains(t, "stderr", h.stderr.String(), "abi-engine: load the engine: open the lease: nats: timeout")
}

func TestRunStopWhileLoading(t *testing.T) {
	eng := newFakeEngine()
	eng.load = func(ctx context.Context) error {
		<-ctx.Done() // a claim watching the holder for a lease period
		return ctx.Err()
	}
	h := startRun(t, eng, nil, "--config", remoteConfig(t, ""))
	testwait.Closed(t, eng.loadCalled, 10*time.Second, "Load is called")
	h.signal(t)
	if code := h.exit(t); code != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, h.stderr)
	}
	select {
	case <-eng.shutdownCalled:
		t.Error("Shutdown was called for an engine that never loaded")
	default:
	}
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRunServesHTTPFromTheStart(t *testing.T) {
	eng := newFakeEngine()
	release := make(chan struct{})
	eng.load = func(context.Context) error {
		<-release
		return nil
	}
	addr := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	h := startRun(t, eng, nil, "--config", remoteConfig(t, ""), "--http", addr)
	base := "http://" + addr
	// While the engine loads, it is alive but not ready.
	testwait.For(t, 10*time.Second, "/healthz answers 200 while loading", func() bool {
		code, _ := httpGet(base + "/healthz")
		return code == http.StatusOK
	})
	if code, body := httpGet(base + "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while loading: %d %q, want 503", code, body)
	}
	close(release)
	testwait.For(t, 10*time.Second, "/readyz answers 200 once loaded", func() bool {
		code, _ := httpGet(base + "/readyz")
		return code == http.StatusOK
	})
	if code, body := httpGet(base + "/metrics"); code != http.StatusOK || !strings.Contains(body, "abi_engine_fake_total") {
		t.Errorf("/metrics: %d, want the engine's registry:\n%s", code, body)
	}
	if code, body := httpGet(base + "/status"); code != http.StatusOK || !strings.Contains(body, `"fake"`) {
		t.Errorf("/status: %d %q, want the engine's status", code, body)
	}
	h.signal(t)
	if code := h.exit(t); code != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, h.stderr)
	}
	if code, _ := httpGet(base + "/healthz"); code != 0 {
		t.Errorf("the HTTP server still answers after run returned (%d)", code)
	}
}
