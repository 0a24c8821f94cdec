package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/nats-io/nats.go/jetstream"
)

// logLines returns the process's output as JSON log lines, failing on any line that is
// not one: every library message must come through the engine's logger.
func logLines(t *testing.T, p *proc) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(p.out.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			// The last line of a failed run is the CLI's own error, not a log line.
			if strings.HasPrefix(line, "abi-engine: ") {
				continue
			}
			t.Errorf("%s printed a line that is not a JSON log line: %q", p.name, line)
			continue
		}
		lines = append(lines, m)
	}
	return lines
}

// noWarnings fails on every log line of p at level warn or above.
func noWarnings(t *testing.T, p *proc) {
	t.Helper()
	for _, m := range logLines(t, p) {
		if lvl := m["level"]; lvl != "info" && lvl != "debug" {
			t.Errorf("%s logged at %v on a clean run: %v", p.name, lvl, m)
		}
	}
}

// TestCleanExitLogsNoWarning is issue 10 item 9: a clean run (start, serve, stand by,
// hand over, exit; clients next to it) logs nothing at warn or above, so a warning in
// the log means something.
func TestCleanExitLogsNoWarning(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: 1, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Drain: 1, HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	c := start(t, "client", engineConfig{NATSURL: srv.URL(), Role: "client", HTTPPort: testproc.FreePort(t)})
	c.waitState("client", 20*time.Second)
	tf := startTraffic(t, srv.URL(), 2)
	tf.waitAnswers(t, a.instanceID(), 50, 20*time.Second)
	a.signal(syscall.SIGTERM)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d", code)
	}
	b.waitState("serving", 10*time.Second)
	tf.waitAnswers(t, b.instanceID(), 50, 20*time.Second)
	tf.halt()
	for _, p := range []*proc{c, b} {
		p.signal(syscall.SIGTERM)
		if code := p.exitCode(30 * time.Second); code != 0 {
			t.Fatalf("%s exited %d", p.name, code)
		}
	}
	for _, p := range []*proc{a, b, c} {
		noWarnings(t, p)
	}
}

// TestHTTPPortInUseExitsOne is issue 10 item 9: an engine whose probes cannot be
// served exits 1 at start naming the address, before it touches the broker, instead
// of serving without HTTP.
func TestHTTPPortInUseExitsOne(t *testing.T) {
	srv := natstest.Start(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	p := start(t, "engine", engineConfig{NATSURL: srv.URL(), HTTPPort: port})
	if code := p.exitCode(30 * time.Second); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	out := p.out.String()
	for _, s := range []string{taken.Addr().String(), "http.listen", "address already in use"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(context.Background(), "ABI_ENGINE"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("the engine touched the lease before giving up: %v", err)
	}
}

// TestUnusableStoreDirSaysWhy is issue 10 item 9: an embedded broker that cannot use
// nats.embedded.store_dir stops the start at once with nats-server's reason, not after
// 10 s with a guess at the port.
func TestUnusableStoreDirSaysWhy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, dir, fmt.Sprintf("nats:\n  embedded: {listen: \"127.0.0.1:0\", store_dir: %q}\nhttp: {listen: \"\"}\n", filepath.Join(file, "nats")))
	p := startArgs(t, "engine", dir, 0, nil, "run", "--config", path)
	if code := p.exitCode(30 * time.Second); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	out := p.out.String()
	if !strings.Contains(out, "not a directory") || strings.Contains(out, "is the port in use") {
		t.Errorf("the output does not give the cause:\n%s", out)
	}
}
