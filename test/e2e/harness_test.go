package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/procstate"
	"github.com/abi-engine/engine/internal/testproc"
	"go.uber.org/goleak"
)

// binary is the abi-engine binary TestMain built.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "abi-engine-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "abi-engine")
	build := exec.Command("go", "build", "-o", binary, "github.com/abi-engine/engine/cmd/abi-engine")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building abi-engine:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is one abi-engine process.
type proc struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	http    string // host:port, "" when HTTP is off
	out     *testproc.Output
	exited  chan struct{}
	waitErr error
}

// engineConfig is the YAML of one engine against the test's broker.
type engineConfig struct {
	NATSURL    string
	Role       string
	Rollout    string
	Lease      float64
	Drain      float64
	HTTPPort   int
	KeyValue   string // adapter
	Objects    string // adapter
	ExtraYAML  string
	NATSYAML   string // more keys of the nats block, each line indented by two spaces
	WorkingDir string
}

func (c engineConfig) yaml() string {
	if c.Role == "" {
		c.Role = "serve"
	}
	if c.Lease == 0 {
		// Short, for quick takeovers, but long enough that a loaded CI machine does not
		// fence an engine whose test is about something else.
		c.Lease = 2
	}
	if c.KeyValue == "" {
		c.KeyValue = "jetstream"
	}
	if c.Objects == "" {
		c.Objects = "jetstream"
	}
	listen := ""
	if c.HTTPPort != 0 {
		listen = fmt.Sprintf("127.0.0.1:%d", c.HTTPPort)
	}
	return fmt.Sprintf(`nats:
  url: %q
%s  engine:
    role: %s
    rollout_id: %q
    lease_seconds: %g
    drain_seconds: %g
    standby_timeout_seconds: 120
services:
  keyvalue: {adapter: %s}
  object_storage: {adapter: %s}
http: {listen: %q}
log: {level: info, format: json}
%s`, c.NATSURL, c.NATSYAML, c.Role, c.Rollout, c.Lease, c.Drain, c.KeyValue, c.Objects, listen, c.ExtraYAML)
}

// start runs `abi-engine run` with cfg in its own working directory.
func start(t testing.TB, name string, cfg engineConfig, env ...string) *proc {
	t.Helper()
	dir := cfg.WorkingDir
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte(cfg.yaml()), 0o644); err != nil {
		t.Fatal(err)
	}
	return startArgs(t, name, dir, cfg.HTTPPort, env, "run", "--config", path)
}

func startArgs(t testing.TB, name, dir string, httpPort int, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: &testproc.Output{}, exited: make(chan struct{})}
	if httpPort != 0 {
		p.http = fmt.Sprintf("127.0.0.1:%d", httpPort)
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("--- %s output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

// exitCode waits for the process to exit within d and returns its exit code.
func (p *proc) exitCode(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %s", p.name, d)
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	}
	if p.waitErr != nil {
		p.t.Fatalf("%s: %v", p.name, p.waitErr)
	}
	return 0
}

// signal sends sig; a SIGSTOP returns once the process has stopped (see procstate).
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
	if sig == syscall.SIGSTOP {
		waitStopped(p.t, p.name, p.cmd.Process.Pid)
	}
}

// waitStopped waits until every thread of pid has stopped: a SIGSTOP takes effect after
// kill(2) returns, and a thread that runs on answers calls sent to a "paused" engine.
func waitStopped(t testing.TB, name string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := procstate.WaitStopped(ctx, pid); err != nil {
		t.Fatalf("SIGSTOP to %s: %v", name, err)
	}
}

// get fetches an HTTP path of the process.
func (p *proc) get(path string) (int, string, error) {
	resp, err := http.Get("http://" + p.http + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitHTTP polls path until it answers want (the process is another program: there is
// no event to wait on but its answer).
func (p *proc) waitHTTP(path string, want int, within time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body, err := p.get(path)
		if err == nil && code == want {
			return body
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited while waiting for %s = %d", p.name, path, want)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: %s did not answer %d within %s (last %d %q %v)", p.name, path, want, within, code, body, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitState polls /status until its state is want.
func (p *proc) waitState(want string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, body, err := p.get("/status")
		if err == nil && strings.Contains(body, `"state": "`+want+`"`) {
			return
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited while waiting for state %s", p.name, want)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: state %s not reached within %s (last %q %v)", p.name, want, within, body, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until the process has written a line containing s.
func (p *proc) waitLog(s string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.out.String(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: no log line with %q within %s", p.name, s, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// instanceID reads the process's instance id from /status.
func (p *proc) instanceID() string {
	p.t.Helper()
	_, body, err := p.get("/status")
	if err != nil {
		p.t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, `"instance_id": "`); ok {
			return strings.TrimSuffix(strings.TrimSuffix(v, ","), `"`)
		}
	}
	p.t.Fatalf("no instance_id in %q", body)
	return ""
}

// ctxFor is a context bounded for a test step.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
