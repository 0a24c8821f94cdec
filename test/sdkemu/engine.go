package sdkemu

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Engine is a real abi-engine process serving the kernel services on a test's broker,
// with a service token secret, the memory backends and its HTTP endpoints on loopback.
type Engine struct {
	t      testing.TB
	http   string
	out    *syncBuffer
	exited chan struct{}
	err    error
}

// StartEngine builds abi-engine into a temporary directory and runs it against the
// broker at natsURL with secret in its nats.jwt_secret_file; it is ready (serving)
// when StartEngine returns and killed when the test ends.
func StartEngine(t testing.TB, natsURL string, secret []byte) *Engine {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "abi-engine")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/abi-engine/engine/cmd/abi-engine").CombinedOutput(); err != nil {
		t.Fatalf("build abi-engine: %v\n%s", err, out)
	}
	secretFile := filepath.Join(dir, "jwt-secret")
	if err := os.WriteFile(secretFile, append(bytes.Clone(secret), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cfg := fmt.Sprintf(`nats:
  url: %q
  jwt_secret_file: %q
  engine: {role: serve, lease_seconds: 2}
services:
  keyvalue: {adapter: memory}
  object_storage: {adapter: memory}
http: {listen: "127.0.0.1:%d"}
log: {level: info, format: json}
`, natsURL, secretFile, port)
	cfgFile := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &Engine{t: t, http: fmt.Sprintf("127.0.0.1:%d", port), out: &syncBuffer{}, exited: make(chan struct{})}
	cmd := exec.Command(bin, "run", "--config", cfgFile)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = e.out, e.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		e.err = cmd.Wait()
		close(e.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-e.exited
		if t.Failed() {
			t.Logf("--- abi-engine output:\n%s", e.out.String())
		}
	})
	e.waitReady(60 * time.Second)
	return e
}

// waitReady polls /readyz: the engine is another process, whose readiness has no
// event to wait on but its answer.
func (e *Engine) waitReady(within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, _, err := e.get("/readyz")
		if err == nil && code == http.StatusOK {
			return
		}
		select {
		case <-e.exited:
			e.t.Fatalf("abi-engine exited before it was ready: %v", e.err)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("abi-engine not ready within %s (last: %d %v)", within, code, err)
		}
		time.Sleep(20 * time.Millisecond) // polling another process, bounded by the deadline
	}
}

func (e *Engine) get(path string) (int, string, error) {
	resp, err := http.Get("http://" + e.http + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Gauge is the value of an unlabelled metric on /metrics.
func (e *Engine) Gauge(name string) (float64, error) {
	code, body, err := e.get("/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics answered %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no metric %s on /metrics", name)
}

// Output is what the engine printed so far.
func (e *Engine) Output() string { return e.out.String() }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
