package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/procstate"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
)

// engineProcess is `abi-engine run` as a child process.
type engineProcess struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:<port>
	stderr *testproc.Output
	exited chan struct{}
	code   int
}

// startEngine runs the built binary with cfg (its http.listen is set here to a free
// port) in a directory of its own, with env and nothing of the test's environment but
// PATH and HOME.
func startEngine(t *testing.T, cfg string, env ...string) *engineProcess {
	t.Helper()
	bin := buildBinary(t)
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	path := writeFile(t, dir, "engine.yaml", cfg+"http: {listen: \""+addr+"\"}\n")
	p := &engineProcess{base: "http://" + addr, stderr: &testproc.Output{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "run", "--config", path)
	p.cmd.Dir = dir
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	p.cmd.Stdout = p.stderr
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code = -1
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// wait returns the exit code once the process has exited.
func (p *engineProcess) wait(t *testing.T, bound time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(bound):
		t.Fatalf("abi-engine run still runs after %s; its output:\n%s", bound, p.stderr)
		return 0
	}
}

// signal sends sig; a SIGSTOP returns once the process has stopped (see procstate).
func (p *engineProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if sig == syscall.SIGSTOP {
		if err := procstate.WaitStopped(t.Context(), p.cmd.Process.Pid); err != nil {
			t.Fatalf("SIGSTOP: %v", err)
		}
	}
}

func (p *engineProcess) waitReady(t *testing.T) {
	t.Helper()
	testwait.For(t, 60*time.Second, "GET /readyz answers 200", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("abi-engine run exited %d before it was ready:\n%s", p.code, p.stderr)
		default:
		}
		code, _ := httpGet(p.base + "/readyz")
		return code == http.StatusOK
	})
}

type engineStatus struct {
	InstanceID string `json:"instance_id"`
	State      string `json:"state"`
	RolloutID  string `json:"rollout_id"`
	Version    string `json:"version"`
}

func (p *engineProcess) status(t *testing.T) engineStatus {
	t.Helper()
	code, body := httpGet(p.base + "/status")
	var st engineStatus
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("GET /status: %d %q (%v)", code, body, err)
	}
	return st
}

func sharedEngineConfig(url string) string {
	return "nats: {url: \"" + url + "\", engine: {lease_seconds: 2, drain_seconds: 1}}\n"
}

func TestProcessEmbeddedBrokerHandsOverOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	store := filepath.Join(t.TempDir(), "nats")
	p := startEngine(t, "nats: {embedded: {listen: \"127.0.0.1:0\", store_dir: \""+store+"\"}}\n")
	p.waitReady(t)
	st := p.status(t)
	if st.State != "serving" || st.Version != testVersion || len(st.InstanceID) != 32 {
		t.Errorf("/status %+v: want a serving engine of version %s", st, testVersion)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, p.stderr)
	}
	wantContains(t, "logs", p.stderr.String(), "handing over", "handover complete")
}

func TestProcessSecondEngineOfTheSameRolloutExits3(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	first := startEngine(t, sharedEngineConfig(srv.URL()))
	first.waitReady(t)
	holder := first.status(t)

	// The lease as `abi-engine status` shows it names the running engine.
	r := runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "status", r.stdout, "held by "+holder.InstanceID, "version:   "+testVersion, "rollout:   none")

	second := startEngine(t, sharedEngineConfig(srv.URL()))
	if code := second.wait(t, 60*time.Second); code != exitServing {
		t.Fatalf("the second engine exited %d, want 3:\n%s", code, second.stderr)
	}
	wantContains(t, "the second engine's output", second.stderr.String(),
		"another engine already serves this NATS account: "+holder.InstanceID)

	first.signal(t, syscall.SIGTERM)
	if code := first.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the first engine exited %d after SIGTERM, want 0:\n%s", code, first.stderr)
	}
	r = runCLI(t, nil, "status", "--nats", srv.URL())
	wantContains(t, "status after the handover", r.stdout, "the lease is free: released at revision")
}

func TestProcessRolloutStandsByAndTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	old := startEngine(t, sharedEngineConfig(srv.URL()), "ABI_ROLLOUT_ID=r1")
	old.waitReady(t)
	next := startEngine(t, sharedEngineConfig(srv.URL()), "ABI_ROLLOUT_ID=r2")
	next.waitReady(t) // a standby is ready
	if st := next.status(t); st.State != "standby" || st.RolloutID != "r2" {
		t.Fatalf("the new rollout's engine: %+v, want standby of r2", st)
	}

	old.signal(t, syscall.SIGTERM)
	if code := old.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the old engine exited %d after SIGTERM, want 0:\n%s", code, old.stderr)
	}
	testwait.For(t, 30*time.Second, "the standby serves after the handover", func() bool {
		return next.status(t).State == "serving"
	})
	r := runCLI(t, nil, "status", "--nats", srv.URL(), "--json")
	var got statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Holder == nil ||
		got.Holder.InstanceID != next.status(t).InstanceID || got.Holder.RolloutID != "r2" {
		t.Errorf("status after the handover (%v): %s, want the new engine of rollout r2", err, r.stdout)
	}
	next.signal(t, syscall.SIGTERM)
	if code := next.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the new engine exited %d after SIGTERM, want 0:\n%s", code, next.stderr)
	}
}

func TestProcessVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out, err := exec.Command(buildBinary(t), "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "abi-engine "+testVersion+" (") {
		t.Errorf("abi-engine version: %q (%v), want the version set with -ldflags -X main.version", out, err)
	}
}
