package sdkemu

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/testproc"
)

// Engine is a real abi-engine process serving the kernel services on a test's broker,
// with a service token secret and its HTTP endpoints on loopback.
type Engine struct {
	t      testing.TB
	cmd    *exec.Cmd
	http   string
	out    *testproc.Output
	exited chan struct{}
	err    error
}

// EngineConfig is what differs between the engines of the tests.
type EngineConfig struct {
	// Rollout is the engine's rollout id; "" is none. A second engine of another
	// rollout stands by and takes over when the first hands over.
	Rollout string
	// DrainSeconds bounds a handing-over engine's wait for its open sessions; 0 is
	// the engine's default.
	DrainSeconds float64
	// Backend is the keyvalue and object_storage adapter: "memory" (the default) or
	// "jetstream" (shared, which a rollout needs).
	Backend string
}

// BuildEngine builds abi-engine into a temporary directory and returns its path.
func BuildEngine(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "abi-engine")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/abi-engine/engine/cmd/abi-engine").CombinedOutput(); err != nil {
		t.Fatalf("build abi-engine: %v\n%s", err, out)
	}
	return bin
}

// StartEngine runs the abi-engine binary bin against the broker at natsURL with
// secret in its nats.jwt_secret_file; it is ready (/readyz: serving, or standing by)
// when StartEngine returns and killed when the test ends.
func StartEngine(t testing.TB, bin, natsURL string, secret []byte, c EngineConfig) *Engine {
	t.Helper()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "jwt-secret")
	if err := os.WriteFile(secretFile, append(bytes.Clone(secret), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if c.Backend == "" {
		c.Backend = "memory"
	}
	drain := ""
	if c.DrainSeconds > 0 {
		drain = fmt.Sprintf(", drain_seconds: %g", c.DrainSeconds)
	}
	port := testproc.FreePort(t)
	cfg := fmt.Sprintf(`nats:
  url: %q
  jwt_secret_file: %q
  engine: {role: serve, lease_seconds: 2, rollout_id: %q%s}
services:
  keyvalue: {adapter: %s}
  object_storage: {adapter: %s}
http: {listen: "127.0.0.1:%d"}
log: {level: info, format: json}
`, natsURL, secretFile, c.Rollout, drain, c.Backend, c.Backend, port)
	cfgFile := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &Engine{t: t, http: fmt.Sprintf("127.0.0.1:%d", port), out: &testproc.Output{}, exited: make(chan struct{})}
	e.cmd = exec.Command(bin, "run", "--config", cfgFile)
	e.cmd.Dir = dir
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		e.err = e.cmd.Wait()
		close(e.exited)
	}()
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		<-e.exited
		if t.Failed() {
			t.Logf("--- abi-engine %s output:\n%s", c.Rollout, e.out.String())
		}
	})
	e.waitReady(60 * time.Second)
	return e
}

// Signal sends sig to the process.
func (e *Engine) Signal(sig os.Signal) {
	e.t.Helper()
	if err := e.cmd.Process.Signal(sig); err != nil {
		e.t.Fatal(err)
	}
}

// Exited is closed when the process has exited; ExitErr is then its Wait error.
func (e *Engine) Exited() <-chan struct{} { return e.exited }

// ExitErr is the process's exit (nil: status 0), once Exited is closed.
func (e *Engine) ExitErr() error { return e.err }

// WaitState polls /status until the engine's state is want (serving, standby, …).
func (e *Engine) WaitState(want string, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, body, err := e.get("/status")
		if err == nil && strings.Contains(body, `"state": "`+want+`"`) {
			return
		}
		select {
		case <-e.exited:
			e.t.Fatalf("abi-engine exited while waiting for state %s: %v", want, e.err)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("state %s not reached within %s (last %q %v)", want, within, body, err)
		}
		time.Sleep(20 * time.Millisecond) // polling another process, bounded by the deadline
	}
}

// InstanceID is the engine's instance id, from /status.
func (e *Engine) InstanceID() string {
	e.t.Helper()
	_, body, err := e.get("/status")
	if err != nil {
		e.t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), `"instance_id": "`); ok {
			return strings.TrimSuffix(strings.TrimSuffix(v, ","), `"`)
		}
	}
	e.t.Fatalf("no instance_id in /status: %q", body)
	return ""
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
