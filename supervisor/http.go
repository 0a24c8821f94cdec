package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Reporter is what the HTTP endpoints ask the engine (docs/design.md §4.5).
type Reporter interface {
	// Healthy is nil while the process is healthy; an error says why not (a holder
	// that believes it serves but has not renewed for more than a lease period).
	Healthy() error
	// Ready reports serving, standing by, or a client.
	Ready() bool
	// Status is the body of GET /status.
	Status() any
}

// Readiness is a Reporter that can say why it is not ready; /readyz then prints it
// (which backend is down, which state the engine is in).
type Readiness interface {
	// Readiness is nil when ready, else why not.
	Readiness() error
}

// notReady is nil when r is ready, else why not.
func notReady(r Reporter) error {
	if rr, ok := r.(Readiness); ok {
		return rr.Readiness()
	}
	if !r.Ready() {
		return errors.New("not ready")
	}
	return nil
}

// HandlerOption configures Handler.
type HandlerOption func(*http.ServeMux)

// WithPprof, when on (http.pprof), also serves net/http/pprof's profiles under
// /debug/pprof/: the index, cmdline, profile (CPU, ?seconds=N), symbol, trace and the
// named profiles (heap, allocs, goroutine, block, mutex, threadcreate).
func WithPprof(on bool) HandlerOption {
	return func(mux *http.ServeMux) {
		if !on {
			return
		}
		mux.HandleFunc("GET /debug/pprof/", pprof.Index) // the named profiles too
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
}

// Handler serves /healthz, /readyz, /status and /metrics, and what opts add.
func Handler(r Reporter, g prometheus.Gatherer, opts ...HandlerOption) http.Handler {
	mux := http.NewServeMux()
	for _, opt := range opts {
		opt(mux)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := r.Healthy(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := notReady(r); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r.Status())
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
}

// HTTP is the engine's HTTP server as a suture service.
type HTTP struct {
	addr    string
	handler http.Handler
	log     *zap.Logger

	mu    sync.Mutex
	bound string
	ln    net.Listener // bound by ListenHTTP, taken by the first Serve
	ready chan struct{}
}

// NewHTTP serves handler on addr ("host:port"; port 0 picks a free one), listening
// when Serve runs.
func NewHTTP(addr string, handler http.Handler, log *zap.Logger) *HTTP {
	return &HTTP{addr: addr, handler: handler, log: log.Named("http"), ready: make(chan struct{})}
}

// ListenHTTP is NewHTTP listening now, so an address that cannot be served (the port
// in use, a host not of this machine) is an error at once: an engine whose probes
// cannot be answered must not start (Kubernetes would kill it as unready, or never
// know it was up). Serve serves on that listener; when Serve returns, it is closed.
func ListenHTTP(addr string, handler http.Handler, log *zap.Logger) (*HTTP, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("supervisor: http listen %s: %w", addr, err)
	}
	h := NewHTTP(addr, handler, log)
	h.ln = ln
	h.bound = ln.Addr().String()
	close(h.ready)
	return h, nil
}

func (h *HTTP) String() string { return "http " + h.addr }

// Addr waits until the server listens and returns its address.
func (h *HTTP) Addr(ctx context.Context) (string, error) {
	select {
	case <-h.ready:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bound, nil
}

// Serve implements suture.Service.
func (h *HTTP) Serve(ctx context.Context) error {
	h.mu.Lock()
	ln := h.ln
	h.ln = nil
	addr := h.addr
	if h.bound != "" {
		addr = h.bound // a restart comes back on the port it had
	}
	h.mu.Unlock()
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("supervisor: http listen %s: %w", addr, err)
		}
	}
	h.mu.Lock()
	h.bound = ln.Addr().String()
	select {
	case <-h.ready:
	default:
		close(h.ready)
	}
	h.mu.Unlock()
	srv := &http.Server{Handler: h.handler, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	h.log.Info("http listening", zap.String("addr", ln.Addr().String()))
	select {
	case err := <-errc:
		return fmt.Errorf("supervisor: http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return ctx.Err()
}
