package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// TestRunHasOneSupervisionTree: in `abi-engine run` the HTTP server, the signal handler
// and everything the engine starts (the embedded broker, its connections, its actors,
// its backends) are services of one suture tree; after the handover nothing of it runs.
func TestRunHasOneSupervisionTree(t *testing.T) {
	c, _, stderr := cliFor(t, nil)
	trees := make(chan *suture.Supervisor, 1)
	c.newEngine = func(cfg *config.Config, log *zap.Logger, version string, tree *suture.Supervisor, fp *failpoint.Set) (runnableEngine, error) {
		trees <- tree
		return newEngine(cfg, log, version, tree, fp)
	}
	fire := make(chan struct{})
	c.signals = func(first, second func()) suture.Service {
		return &testSignals{first: first, second: second, fire: fire}
	}
	addr := "127.0.0.1:" + strconv.Itoa(testproc.FreePort(t))
	path := writeFile(t, t.TempDir(), "abi-engine.yaml", fmt.Sprintf(`nats: {url: "", embedded: {listen: "127.0.0.1:0", store_dir: %q}, engine: {lease_seconds: 2, drain_seconds: 1}}
services: {keyvalue: {adapter: memory}, object_storage: {adapter: memory}}
http: {listen: %q}
`, t.TempDir(), addr))
	code := make(chan int, 1)
	go func() { code <- c.execute(context.Background(), []string{"run", "--config", path}) }()
	tree := testwait.Recv(t, trees, 10*time.Second, "run builds the engine")
	testwait.For(t, 30*time.Second, "GET /readyz answers 200", func() bool {
		c, _ := httpGet("http://" + addr + "/readyz")
		return c == http.StatusOK
	})
	var names []string
	for _, s := range tree.Services() {
		names = append(names, fmt.Sprint(s))
	}
	slices.Sort(names)
	want := []string{"actors", "backends", "control", "embedded nats-server", "http " + addr, "nats lease", "nats service", "session budget", "signals"}
	if !slices.Equal(names, want) {
		t.Errorf("the process's tree holds %v, want %v", names, want)
	}
	select {
	case fire <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the signal service does not take signals")
	}
	if got := testwait.Recv(t, code, 30*time.Second, "run returns"); got != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", got, stderr)
	}
	if left := tree.Services(); len(left) != 0 {
		t.Fatalf("services left running after run returned: %v", left)
	}
}
