package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// TestSecretsAreNeverPrinted is issue 10 item 7: a password or a token in a URL (or
// in a PostgreSQL connection string) appears in no output of the binary. It runs the
// real binary through every path that prints a URL or a configuration value and greps
// everything it printed, and /status, for the secrets.
func TestSecretsAreNeverPrinted(t *testing.T) {
	const (
		password = "pa55-Secret-77"
		token    = "t0ken-Secret-99"
		dbSecret = "db-Secret-55"
	)
	srv := natstest.Start(t, withUser("abi", password))
	good := fmt.Sprintf("nats://abi:%s@%s", password, srv.Addr())    // the broker takes it
	wrong := fmt.Sprintf("nats://abi:%s-x@%s", password, srv.Addr()) // the broker refuses it
	unused := fmt.Sprintf("nats://abi:%s@127.0.0.1:%d", password, testproc.FreePort(t))
	tokenURL := fmt.Sprintf("nats://%s@127.0.0.1:%d", token, testproc.FreePort(t))

	var outputs []string
	check := func(what, out string) {
		t.Helper()
		outputs = append(outputs, out)
		for _, secret := range []string{password, token, dbSecret} {
			if strings.Contains(out, secret) {
				t.Errorf("%s printed the secret %q:\n%s", what, secret, out)
			}
		}
	}
	dir := t.TempDir()
	config := func(nats string, extra ...string) string {
		return writeConfig(t, t.TempDir(), fmt.Sprintf("nats:\n  %s\n  connect_timeout_seconds: 1\n  engine: {lease_seconds: 2, drain_seconds: 1}\n%s", nats, strings.Join(extra, "")))
	}

	// run that cannot connect: the retry warnings and the error, for a password, a
	// wrong password and a token.
	for _, url := range []string{unused, wrong, tokenURL} {
		code, out := runCommand(t, dir, nil, "run", "--config", config(fmt.Sprintf("url: %q", url)), "--http", "")
		if code != 1 {
			t.Errorf("run against %s: exit %d, want 1", url, code)
		}
		check("run that cannot connect", out)
	}
	// The same URL from the environment and the flag.
	code, out := runCommand(t, dir, []string{"ABI_NATS_URL=" + unused}, "run", "--config", config(`url: ""`), "--http", "")
	check(fmt.Sprintf("run with ABI_NATS_URL (exit %d)", code), out)
	code, out = runCommand(t, dir, nil, "run", "--config", config(`url: ""`), "--http", "", "--nats", tokenURL)
	check(fmt.Sprintf("run with --nats (exit %d)", code), out)

	// Stopped while loading: a SIGTERM while the engine still tries to connect.
	slow := startArgs(t, "loading", dir, 0, nil, "run", "--http", "",
		"--config", writeConfig(t, t.TempDir(), fmt.Sprintf("nats: {url: %q, connect_timeout_seconds: 60}\n", unused)))
	slow.waitLog("retrying", 20*time.Second)
	slow.signal(syscall.SIGTERM)
	if code := slow.exitCode(30 * time.Second); code != 0 {
		t.Errorf("stopped while loading: exit %d, want 0", code)
	}
	if !strings.Contains(slow.out.String(), "stopped while loading") {
		t.Errorf("no 'stopped while loading' in:\n%s", slow.out)
	}
	check("stopped while loading", slow.out.String())

	// config check: the summary, invalid URLs, and connection strings.
	for _, cfg := range []string{
		config(fmt.Sprintf("url: %q", good)),
		config(fmt.Sprintf("url: %q", tokenURL+","+good)),
		config(fmt.Sprintf("url: \"nats://abi:%s@host:99999\"", password)),
		config(fmt.Sprintf("url: \"http://abi:%s@host:4222\"", password)),
		config(fmt.Sprintf("url: %q", good), fmt.Sprintf("services:\n  keyvalue: {adapter: postgres, dsn: \"postgres://abi:%s@db:5432/abi\"}\n", dbSecret)),
		config(fmt.Sprintf("url: %q", good), fmt.Sprintf("services:\n  keyvalue: {adapter: jetstream, dsn: \"host=db password=%s\"}\n", dbSecret)),
	} {
		_, out := runCommand(t, dir, nil, "config", "check", "--config", cfg)
		check("config check", out)
	}
	_, out = runCommand(t, dir, []string{"ABI_NATS_URL=" + unused + "x:bad"}, "config", "check", "--config", config(`url: ""`))
	check("config check with ABI_NATS_URL", out)

	// status and call: failing to connect, and working against the broker.
	for _, args := range [][]string{
		{"status", "--nats", unused},
		{"status", "--nats", tokenURL},
		{"status", "--nats", wrong},
		{"status", "--nats", good},
		{"status", "--nats", good, "--json"},
		{"call", "keyvalue", "get", `{"key":"k"}`, "--nats", unused},
		{"call", "keyvalue", "get", `{"key":"k"}`, "--nats", wrong},
		{"call", "keyvalue", "get", `{"key":"k"}`, "--nats", good, "--timeout", "1s"},
	} {
		_, out := runCommand(t, dir, nil, args...)
		check(strings.Join(args[:1], " "), out)
	}

	// The log of a run: start, serve, a broker restart (disconnected, reconnected), a
	// handover; and /status.
	port := testproc.FreePort(t)
	p := startArgs(t, "engine", dir, port, nil, "run", "--config",
		config(fmt.Sprintf("url: %q", good), fmt.Sprintf("http: {listen: \"127.0.0.1:%d\"}\n", port)))
	p.waitState("serving", 20*time.Second)
	srv.Stop()
	p.waitLog("nats disconnected", 20*time.Second)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	p.waitLog("nats reconnected", 20*time.Second)
	p.waitState("serving", 20*time.Second)
	_, body, err := p.get("/status")
	if err != nil {
		t.Fatal(err)
	}
	check("/status", body)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Errorf("the engine exited %d", code)
	}
	check("the log of a run", p.out.String())

	// The grep must have had something to grep: the masked URLs are there.
	if all := strings.Join(outputs, "\n"); !strings.Contains(all, "nats://abi:xxxxx@") || !strings.Contains(all, "nats://xxxxx@") {
		t.Errorf("no output shows a masked URL; was anything printed?\n%.3000s", all)
	}
}
