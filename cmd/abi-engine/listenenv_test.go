package main

import (
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
)

// TestProcessListensWhereTheEnvironmentSays: run with no configuration file (as the
// container image runs it) serves HTTP on ABI_HTTP_LISTEN and its embedded broker on
// ABI_NATS_EMBEDDED_LISTEN, which the image sets to every interface; its metrics say
// which version it is (abi_engine_build_info).
func TestProcessListensWhereTheEnvironmentSays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	httpAddr := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	natsAddr := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	p := &engineProcess{base: "http://" + httpAddr, stderr: &testproc.Output{}, exited: make(chan struct{})}
	p.cmd = exec.Command(buildBinary(t), "run")
	p.cmd.Dir = dir
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"ABI_HTTP_LISTEN=" + httpAddr, "ABI_NATS_EMBEDDED_LISTEN=" + natsAddr}
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	testwait.For(t, 60*time.Second, "GET /readyz on ABI_HTTP_LISTEN answers 200", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("abi-engine run exited before it was ready:\n%s", p.stderr)
		default:
		}
		code, _ := httpGet(p.base + "/readyz")
		return code == http.StatusOK
	})
	id := p.status(t).InstanceID
	code, body := httpGet(p.base + "/metrics")
	if want := `abi_engine_build_info{goversion="` + runtime.Version() + `",version="` + testVersion + `"} 1`; code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("GET /metrics (%d) lacks %s", code, want)
	}
	nc := natstest.Connect(t, "nats://"+natsAddr)
	if !nc.IsConnected() {
		t.Fatalf("no NATS server on ABI_NATS_EMBEDDED_LISTEN %s", natsAddr)
	}
	r := runCLI(t, nil, "status", "--nats", "nats://"+natsAddr)
	wantCode(t, r, exitOK)
	wantContains(t, "status on the embedded broker", r.stdout, "held by "+id)
}
