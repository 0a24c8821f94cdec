package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/nats-io/nats.go/jetstream"
)

// TestClientEngineCreatesNothing is done-when 4 (the process half; the in-process test
// of the root package shows its services reach the serving engine): a client engine
// started in an empty directory creates no file and never creates ABI_ENGINE; auto
// serves alone and is a client next to a serving engine.
func TestClientEngineCreatesNothing(t *testing.T) {
	srv := natstest.Start(t)
	work := t.TempDir()   // the client's working directory: must stay empty
	cfgDir := t.TempDir() // its configuration lives elsewhere
	cfg := engineConfig{NATSURL: srv.URL(), Role: "client", HTTPPort: testproc.FreePort(t), WorkingDir: cfgDir}
	path := filepath.Join(cfgDir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte(cfg.yaml()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startArgs(t, "client", work, cfg.HTTPPort, nil, "run", "--config", path)
	c.waitState("client", 20*time.Second)
	c.waitHTTP("/readyz", 200, time.Second)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(context.Background(), "ABI_ENGINE"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("a client engine touched the lease bucket: %v", err)
	}
	if entries, err := os.ReadDir(work); err != nil || len(entries) != 0 {
		t.Fatalf("a client engine wrote into its working directory: %v %v", entries, err)
	}

	auto1 := start(t, "auto1", engineConfig{NATSURL: srv.URL(), Role: "auto", HTTPPort: testproc.FreePort(t)})
	auto1.waitState("serving", 20*time.Second)
	auto2 := start(t, "auto2", engineConfig{NATSURL: srv.URL(), Role: "auto", HTTPPort: testproc.FreePort(t)})
	auto2.waitState("client", 20*time.Second)
	auto1.waitState("serving", time.Second)
}

// TestZeroConfigRun is done-when 7: `abi-engine run` with no configuration serves with
// the embedded broker, and `abi-engine call keyvalue get` reaches it.
func TestZeroConfigRun(t *testing.T) {
	if l, err := net.Listen("tcp", "127.0.0.1:4222"); err != nil {
		t.Skipf("the embedded broker's default port 4222 is in use here: %v", err)
	} else {
		l.Close()
	}
	dir := t.TempDir()
	port := testproc.FreePort(t)
	p := startArgs(t, "zero-config", dir, port, nil, "run", "--http", "127.0.0.1:"+strconv.Itoa(port))
	p.waitState("serving", 30*time.Second)
	call := func(args ...string) string {
		cmd := exec.Command(binary, append([]string{"call"}, args...)...)
		cmd.Dir = t.TempDir() // no configuration there either: the defaults point at 4222
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("abi-engine call %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	call("keyvalue", "set", `{"key":"greeting","value":"aGVsbG8="}`)
	if out := call("keyvalue", "get", `{"key":"greeting"}`); !strings.Contains(out, `"value":"aGVsbG8="`) || !strings.Contains(out, p.instanceID()) {
		t.Fatalf("get printed %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "nats")); err != nil {
		t.Fatalf("the embedded broker's store is not under data/nats: %v", err)
	}
}
