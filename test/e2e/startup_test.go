package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/nats-io/nats-server/v2/server"
)

// withUser makes a broker that accepts only user u with password p.
func withUser(u, p string) natstest.Option {
	return func(o *server.Options) { o.Username, o.Password = u, p }
}

// writeConfig writes yaml as abi-engine.yaml in dir and returns its path.
func writeConfig(t *testing.T, dir, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCommand runs the binary to its end in dir and returns its exit code and its
// output (both streams).
func runCommand(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("abi-engine %v: %v", args, err)
	return 0, ""
}

// TestStartFailsFast is issue 10 item 6: an engine that cannot make its first
// connection (a broker that refuses the password, a credentials file that does not
// exist, no broker at all) gives up after nats.connect_timeout_seconds and exits 1
// naming the address and the reason, instead of retrying for ever.
func TestStartFailsFast(t *testing.T) {
	srv := natstest.Start(t, withUser("abi", "right"))
	cases := []struct {
		name string
		nats string // the nats block's entries
		says []string
	}{
		{"wrong password", fmt.Sprintf("url: nats://abi:wrong@%s", srv.Addr()),
			[]string{"cannot connect to NATS at nats://abi:", srv.Addr(), "authorization violation"}},
		{"missing credentials file", fmt.Sprintf("url: %s\n  credentials: /nonexistent/abi.creds", srv.URL()),
			[]string{"cannot connect to NATS at " + srv.URL(), "/nonexistent/abi.creds", "no such file or directory"}},
		{"no broker there", "url: nats://127.0.0.1:" + fmt.Sprint(testproc.FreePort(t)),
			[]string{"cannot connect to NATS at nats://127.0.0.1:", "connection refused", "gave up after"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			port := testproc.FreePort(t)
			path := writeConfig(t, dir, fmt.Sprintf("nats:\n  %s\n  connect_timeout_seconds: 1\nhttp: {listen: \"127.0.0.1:%d\"}\n", tc.nats, port))
			p := startArgs(t, tc.name, dir, port, nil, "run", "--config", path)
			if code := p.exitCode(30 * time.Second); code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			out := p.out.String()
			for _, s := range tc.says {
				if !strings.Contains(strings.ToLower(out), strings.ToLower(s)) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestReconnectsForEverOnceStarted is the other half of item 6: the bound is on the
// first connection only; a broker that goes away for longer than it after the start
// is waited for.
func TestReconnectsForEverOnceStarted(t *testing.T) {
	srv := natstest.Start(t)
	port := testproc.FreePort(t)
	dir := t.TempDir()
	// lease 4 s: the engine fences 2 s after its last renewal, later than the 1 s bound.
	path := writeConfig(t, dir, fmt.Sprintf("nats:\n  url: %s\n  connect_timeout_seconds: 1\n  engine: {lease_seconds: 4}\nhttp: {listen: \"127.0.0.1:%d\"}\n", srv.URL(), port))
	p := startArgs(t, "engine", dir, port, nil, "run", "--config", path)
	p.waitState("serving", 20*time.Second)
	srv.Stop()
	p.waitState("fenced", 20*time.Second)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	p.waitState("serving", 30*time.Second)
}

// TestConfigCheckReportsCredentials: config check reports a credentials file that
// does not exist or cannot be read, and exits 2.
func TestConfigCheckReportsCredentials(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, path, says string }{
		{"missing", filepath.Join(dir, "missing.creds"), "no such file or directory"},
		{"a directory", dir, "a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, t.TempDir(), fmt.Sprintf("nats: {url: \"nats://127.0.0.1:4222\", credentials: %q}\n", tc.path))
			code, out := runCommand(t, dir, nil, "config", "check", "--config", path)
			if code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", code, out)
			}
			for _, s := range []string{"nats.credentials", tc.path, tc.says} {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestRolesWithNoURL is issue 10 item 1: with an empty nats.url, client and auto first
// look for a NATS server at nats.embedded.listen. Next to a zero-config serving engine
// both become its clients, writing nothing (no data/nats); alone, a client exits 1
// naming the address it tried and an auto engine starts the embedded broker and serves.
// Every engine here is given the same embedded address (not the default 4222, which
// other tests on the machine may hold) and no URL.
func TestRolesWithNoURL(t *testing.T) {
	listen := fmt.Sprintf("127.0.0.1:%d", testproc.FreePort(t))
	cfgDir := t.TempDir() // the configurations live apart from the working directories
	engine := func(name, role string) (*proc, string) {
		t.Helper()
		work := t.TempDir()
		port := testproc.FreePort(t)
		path := filepath.Join(cfgDir, name+".yaml")
		yaml := fmt.Sprintf("nats:\n  embedded: {listen: %q, store_dir: data/nats}\n  connect_timeout_seconds: 1\n  engine: {lease_seconds: 2, drain_seconds: 1}\nhttp: {listen: \"127.0.0.1:%d\"}\n", listen, port)
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return startArgs(t, name, work, port, nil, "run", "--config", path, "--role", role), work
	}
	empty := func(p *proc, dir string) {
		t.Helper()
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Errorf("%s wrote into its working directory: %v %v", p.name, entries, err)
		}
	}
	roleClient := func(p *proc) {
		t.Helper()
		p.waitState("client", 20*time.Second)
		if _, body, err := p.get("/status"); err != nil || !strings.Contains(body, `"role": "client"`) {
			t.Errorf("%s /status: %s %v, want role client", p.name, body, err)
		}
	}

	serving, servingDir := engine("serving", "serve")
	serving.waitState("serving", 30*time.Second)
	if _, err := os.Stat(filepath.Join(servingDir, "data", "nats")); err != nil {
		t.Fatalf("the serving engine's embedded broker keeps no store under data/nats: %v", err)
	}
	auto, autoDir := engine("auto", "auto")
	roleClient(auto)
	client, clientDir := engine("client", "client")
	roleClient(client)
	empty(auto, autoDir)
	empty(client, clientDir)
	serving.waitState("serving", time.Second)
	for _, p := range []*proc{client, auto, serving} {
		p.signal(syscall.SIGTERM)
		if code := p.exitCode(30 * time.Second); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM, want 0", p.name, code)
		}
	}

	alone, aloneDir := engine("client-alone", "client")
	if code := alone.exitCode(30 * time.Second); code != 1 {
		t.Fatalf("a client with nothing at %s exited %d, want 1", listen, code)
	}
	if out := alone.out.String(); !strings.Contains(out, listen) || !strings.Contains(out, "connection refused") {
		t.Errorf("the client's output does not name %s and why:\n%s", listen, out)
	}
	empty(alone, aloneDir)

	autoAlone, autoAloneDir := engine("auto-alone", "auto")
	autoAlone.waitState("serving", 30*time.Second)
	if _, err := os.Stat(filepath.Join(autoAloneDir, "data", "nats")); err != nil {
		t.Fatalf("an auto engine alone serves without its embedded broker's store: %v", err)
	}
}

// TestSIGHUPHandsOver is issue 10 item 8: SIGHUP hands over like SIGTERM. The holder
// releases the lease and exits 0, and the standby serves at once rather than after a
// lease period (20 s here), which is what it would wait for a holder killed by the
// signal.
func TestSIGHUPHandsOver(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Lease: 20, Drain: 1, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	// Loaded, not only serving: a signal while Load returns is "stopped while loading".
	a.waitHTTP("/readyz", 200, 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Lease: 20, Drain: 1, HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	a.signal(syscall.SIGHUP)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d after SIGHUP, want 0", code)
	}
	for _, s := range []string{"stop requested: handing over", "handover complete: exiting"} {
		if !strings.Contains(a.out.String(), s) {
			t.Errorf("A's log lacks %q", s)
		}
	}
	// Half the lease: a release, not a takeover of a silent holder.
	b.waitState("serving", 10*time.Second)
}
