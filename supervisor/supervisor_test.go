package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBrokerServesAndStops(t *testing.T) {
	b, err := NewBroker("127.0.0.1:0", t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	tree := NewTree("test", zap.NewNop(), 5*time.Second)
	tree.Add(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := tree.ServeBackground(ctx)
	defer func() {
		cancel()
		<-done
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	url, err := b.URL(wctx)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := Dial(wctx, ConnConfig{URL: url, Name: "test"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Fatal("not connected")
	}
	if _, err := nc.JetStream(); err != nil {
		t.Fatal(err)
	}
}

func TestBrokerRejectsBadListen(t *testing.T) {
	for _, listen := range []string{"nope", "127.0.0.1:x"} {
		if _, err := NewBroker(listen, t.TempDir(), zap.NewNop()); err == nil || !strings.Contains(err.Error(), listen) {
			t.Errorf("NewBroker(%q) = %v, want an error naming it", listen, err)
		}
	}
}

func TestDialGivesUpWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, ConnConfig{URL: "nats://127.0.0.1:1", Name: "test", Timeout: 100 * time.Millisecond}, zap.NewNop())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Dial = %v", err)
	}
}

type reporter struct {
	healthy error
	ready   bool
}

func (r reporter) Healthy() error { return r.healthy }
func (r reporter) Ready() bool    { return r.ready }
func (r reporter) Status() any    { return map[string]any{"state": "serving"} }

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "abi_engine_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	get := func(r Reporter, path string) (int, string) {
		rec := httptest.NewRecorder()
		Handler(r, reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	if code, _ := get(reporter{ready: true}, "/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get(reporter{healthy: errors.New("no renewal for 25s")}, "/healthz"); code != 503 || !strings.Contains(body, "no renewal") {
		t.Errorf("/healthz wedged = %d %q", code, body)
	}
	if code, _ := get(reporter{ready: true}, "/readyz"); code != 200 {
		t.Errorf("/readyz = %d", code)
	}
	if code, _ := get(reporter{}, "/readyz"); code != 503 {
		t.Errorf("/readyz not ready = %d", code)
	}
	if code, body := get(reporter{}, "/status"); code != 200 || !strings.Contains(body, `"state": "serving"`) {
		t.Errorf("/status = %d %q", code, body)
	}
	if code, body := get(reporter{}, "/metrics"); code != 200 || !strings.Contains(body, "abi_engine_test_total 1") {
		t.Errorf("/metrics = %d %q", code, body)
	}
}

// The profiles are served only with WithPprof(true) (http.pprof), beside the rest.
func TestHandlerPprof(t *testing.T) {
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	for _, on := range []bool{false, true} {
		h := Handler(reporter{ready: true}, prometheus.NewRegistry(), WithPprof(on))
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
			code, body := get(h, path)
			switch {
			case on && (code != 200 || body == ""):
				t.Errorf("pprof on: %s = %d %.80q", path, code, body)
			case !on && code != 404:
				t.Errorf("pprof off: %s = %d, want 404", path, code)
			}
		}
		if code, _ := get(h, "/healthz"); code != 200 {
			t.Errorf("pprof %v: /healthz = %d", on, code)
		}
	}
}

func TestHTTPServesUntilCancelled(t *testing.T) {
	h := NewHTTP("127.0.0.1:0", Handler(reporter{ready: true}, prometheus.NewRegistry()), zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.Serve(ctx) }()
	addr, err := h.Addr(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz = %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve = %v", err)
	}
}

func TestDialGivesUpAtTheBound(t *testing.T) {
	// No context deadline: the bound alone ends the tries.
	_, err := Dial(context.Background(), ConnConfig{URL: "nats://127.0.0.1:1", Name: "test", ConnectTimeout: 300 * time.Millisecond}, zap.NewNop())
	var ce *ConnectError
	if !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrNoServers) {
		t.Fatalf("Dial = %v, want a *ConnectError of a refused connection that timed out", err)
	}
	for _, s := range []string{"nats://127.0.0.1:1", "connection refused", "gave up after"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
}

func TestDialGivesUpAtOnceOnAReasonNoRetryChanges(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "abi", "right" })
	cases := []struct {
		name string
		cfg  ConnConfig
		is   error
	}{
		{"wrong password", ConnConfig{URL: "nats://abi:wrong@" + srv.Addr()}, nats.ErrAuthorization},
		{"missing credentials", ConnConfig{URL: srv.URL(), Credentials: filepath.Join(t.TempDir(), "none.creds")}, fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A bound far longer than the test: only giving up at once passes.
			tc.cfg.ConnectTimeout = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := Dial(ctx, tc.cfg, zap.NewNop())
			var ce *ConnectError
			if !errors.As(err, &ce) || !errors.Is(err, tc.is) || ce.Ended != nil {
				t.Fatalf("Dial = %v, want a *ConnectError for %v, given up before any deadline", err, tc.is)
			}
		})
	}
}

// TestBrokerReportsWhyItCannotStart: what stops the embedded broker (a store directory
// it cannot use, the port in use) is reported at once, in nats-server's words, not as
// a readiness timeout 10 s later guessing at the port.
func TestBrokerReportsWhyItCannotStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cases := []struct {
		name, listen, storeDir, says string
	}{
		{"store directory is a file", "127.0.0.1:0", filepath.Join(file, "nats"), "not a directory"},
		{"port in use", taken.Addr().String(), t.TempDir(), "address already in use"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBroker(tc.listen, tc.storeDir, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			// Shorter than the broker's own 10 s readiness bound: only a cause reported
			// at once arrives in time.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- b.Serve(ctx) }()
			_, err = b.URL(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "is the port in use") {
				t.Errorf("URL = %v, want the cause %q", err, tc.says)
			}
			cancel()
			<-errc
		})
	}
}

// TestAsynchronousErrorsGoToTheLog: nats.go's asynchronous errors (a permissions
// violation, a slow consumer) come through the engine's logger, not as bare lines on
// standard error in the middle of the JSON log.
func TestAsynchronousErrorsGoToTheLog(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "abi", Password: "p", Permissions: &server.Permissions{
			Subscribe: &server.SubjectPermission{Deny: []string{"forbidden.>"}},
		}}}
	})
	cases := []struct {
		name    string
		provoke func(t *testing.T, nc *nats.Conn)
		says    string
	}{
		{"permissions violation", func(t *testing.T, nc *nats.Conn) {
			if _, err := nc.Subscribe("forbidden.x", func(*nats.Msg) {}); err != nil {
				t.Fatal(err)
			}
		}, "permissions violation"},
		{"slow consumer", func(t *testing.T, nc *nats.Conn) {
			block := make(chan struct{})
			t.Cleanup(func() { close(block) })
			sub, err := nc.Subscribe("slow", func(*nats.Msg) { <-block })
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.SetPendingLimits(1, -1); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				if err := nc.Publish("slow", nil); err != nil {
					t.Fatal(err)
				}
			}
		}, "slow consumer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			nc, err := Dial(ctx, ConnConfig{URL: "nats://abi:p@" + srv.Addr(), Name: "test"}, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			tc.provoke(t, nc)
			deadline := time.Now().Add(10 * time.Second)
			for {
				for _, e := range logs.FilterMessage("nats: asynchronous error").All() {
					if strings.Contains(strings.ToLower(fmt.Sprint(e.ContextMap()["error"])), tc.says) {
						return
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no log entry of the %s; logged: %v", tc.says, logs.All())
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
