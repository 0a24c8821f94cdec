package nodejs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/test/sdkemu"
)

// required turns a skip into a failure (CI sets it once npm ci worked).
const required = "ABI_TEST_NODE"

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(required) == "1" {
		t.Fatalf("the Node.js client cannot run (%s=1): %s", required, msg)
	}
	t.Skipf("the Node.js client does not run: %s (set %s=1 to make this a failure)", msg, required)
}

// TestNodeClient runs smoke.mjs against a real engine on a broker whose max payload is
// 64 KiB, and passes when the script does; the script's report is the test's log.
func TestNodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and starts an abi-engine process and node")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "no node on PATH")
	}
	for _, pkg := range []string{"@nats-io/transport-node", "protobufjs", "jsonwebtoken"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			unavailable(t, "package %s is not installed (run npm ci in test/nodejs)", pkg)
		}
	}
	protoDir, err := filepath.Abs(filepath.Join("..", "..", "proto"))
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("nodejs-smoke-secret-0123456789abcdef")
	srv := natstest.Start(t, natstest.WithMaxPayload(64<<10))
	engine := sdkemu.StartEngine(t, sdkemu.BuildEngine(t), srv.URL(), secret, sdkemu.EngineConfig{})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "smoke.mjs")
	cmd.Env = append(os.Environ(),
		"ABI_NATS_URL="+srv.URL(),
		"ABI_TEST_SECRET="+string(secret),
		"ABI_PROTO_DIR="+protoDir,
	)
	out, err := cmd.CombinedOutput()
	t.Logf("--- node smoke.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the Node.js client failed: %v", err)
	}
	// Every session the script opened (transfers, parked replies) it closed.
	testwait.For(t, 20*time.Second, "the engine to hold no session after the script", func() bool {
		n, err := engine.Gauge("abi_engine_open_sessions")
		return err == nil && n == 0
	})
}
