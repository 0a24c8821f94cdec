package pysdk

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// TestSDKBench runs sdk_bench.py, the figures of the Python SDK against abi-engine
// (docs/performance.md), with ABI_SDK_BENCH=1: a broker taking 8 MiB messages (as the
// Python dev broker does), abi-engine on the jetstream backends, and the published SDK.
// ABI_SDK_BENCH_ARGS passes arguments to the script (e.g. "--rounds 1 --seconds 1").
func TestSDKBench(t *testing.T) {
	if os.Getenv("ABI_SDK_BENCH") != "1" {
		t.Skip("the SDK figures run with ABI_SDK_BENCH=1 (minutes of full load)")
	}
	py := venv(t, python(t))
	dir := t.TempDir()
	bin := buildEngine(t, dir)
	srv := natstest.Start(t, natstest.WithMaxPayload(8<<20))
	secret := []byte("pysdk-bench-secret-0123456789abcdef")
	secretFile := secretFileIn(t, dir, secret)
	token := tokenFor(t, secret, "sdk-bench", 4*time.Hour)
	port := testproc.FreePort(t)
	e := startEngine(t, bin, "abi-engine", "", deployConfig(srv.URL(), secretFile, port), port)
	e.waitState("serving", 60*time.Second)

	// The broker runs in this process: its CPU is this process's (the test itself only
	// waits meanwhile).
	brokerCPU := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%.6f\n", time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds())
	}))
	defer brokerCPU.Close()

	bench := func(engine string, pid int) {
		args := []string{"sdk_bench.py"}
		if !transfers {
			args = append(args, "--unary-get")
		}
		args = append(args, strings.Fields(os.Getenv("ABI_SDK_BENCH_ARGS"))...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, args...)
		cmd.Env = append(os.Environ(), "ABI_NATS_URL="+srv.URL(), "ABI_SERVICE_TOKEN="+token, "PYTHONDONTWRITEBYTECODE=1",
			fmt.Sprintf("ABI_BENCH_ENGINE_PID=%d", pid), "ABI_BENCH_BROKER_CPU="+brokerCPU.URL)
		out, err := cmd.CombinedOutput()
		t.Logf("--- sdk_bench.py %s against %s:\n%s", strings.Join(args[1:], " "), engine, out)
		if err != nil {
			t.Fatalf("sdk_bench.py against %s: %v", engine, err)
		}
	}
	bench("abi-engine", e.cmd.Process.Pid)

	// The Python engine on the same broker in the same run, with its own default
	// keyvalue and object_storage backends (in memory, files), after abi-engine stopped.
	if os.Getenv(requiredEngine) != "1" {
		t.Logf("the Python engine's figures run with %s=1 too", requiredEngine)
		return
	}
	enginePy := engineVenv(t, python(t))
	e.signal(syscall.SIGTERM)
	if code := e.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("abi-engine exited %d after SIGTERM", code)
	}
	pyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pyDir, "config.yaml"), []byte(pyEngineConfig(srv.URL(), string(secret), false)), 0o644); err != nil {
		t.Fatal(err)
	}
	here, err := filepath.Abs("pyengine")
	if err != nil {
		t.Fatal(err)
	}
	pyEngine := startProc(t, "python engine", pyDir, []string{"PYTHONPATH=" + here, "PYTHONDONTWRITEBYTECODE=1"},
		enginePy, filepath.Join(here, "serve.py"), "config.yaml")
	pyEngine.waitOutput("loaded ", 180*time.Second)
	bench("the Python engine (naas-abi-core 3.1.0)", pyEngine.cmd.Process.Pid)
}
