package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/abi-engine/engine/internal/natstest"
)

// contextRoot writes the natscli contexts (name: url) under a directory of its own,
// selects selected ("" for none) and returns the directory, for XDG_CONFIG_HOME.
func contextRoot(t *testing.T, selected string, urls map[string]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, url := range urls {
		writeFile(t, dir, name+".json", fmt.Sprintf(`{"url": %q}`, url))
	}
	if selected != "" {
		writeFile(t, filepath.Join(root, "nats"), "context.txt", selected)
	}
	return root
}

// TestConnectionPrecedence: a flag wins over the natscli context, the context over the
// environment and the configuration file, and those over the selected context, which
// is used only where no configuration file is read. The broker a command reached is
// the one status names.
func TestConnectionPrecedence(t *testing.T) {
	live := natstest.Start(t).URL()
	dead := "nats://127.0.0.1:1"
	dir := t.TempDir()
	deadFile := writeFile(t, dir, "dead.yaml", fmt.Sprintf("nats: {url: %q}\n", dead))
	liveFile := writeFile(t, dir, "live.yaml", fmt.Sprintf("nats: {url: %q}\n", live))
	root := contextRoot(t, "picked", map[string]string{"live": live, "dead": dead, "picked": live})
	xdg := map[string]string{"XDG_CONFIG_HOME": root}
	with := func(more map[string]string) map[string]string {
		m := map[string]string{"XDG_CONFIG_HOME": root}
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		how  string
		env  map[string]string
		args []string
		want string // the URL reached; "" for none (a failure to connect)
	}{
		{"--nats over --context", xdg, []string{"--context", "dead", "--nats", live}, live},
		{"--context over the file", xdg, []string{"--context", "live", "--config", deadFile}, live},
		{"--context over ABI_NATS_URL", with(map[string]string{"ABI_NATS_URL": dead}), []string{"--context", "live"}, live},
		{"NATS_CONTEXT as --context", with(map[string]string{"NATS_CONTEXT": "live", "ABI_NATS_URL": dead}), nil, live},
		{"--context over NATS_CONTEXT", with(map[string]string{"NATS_CONTEXT": "dead"}), []string{"--context", "live"}, live},
		{"the selected context without a file", xdg, nil, live},
		{"ABI_NATS_URL over the selected context", with(map[string]string{"ABI_NATS_URL": dead}), nil, ""},
		{"--nats over the selected context", contextRootEnv(t, "dead", dead), []string{"--nats", live}, live},
		{"the file over the selected context", contextRootEnv(t, "dead", dead), []string{"--config", liveFile}, live},
	} {
		r := runCLI(t, tc.env, append([]string{"status", "--json"}, tc.args...)...)
		var st statusJSON
		switch {
		case tc.want == "" && (r.code != exitRuntime || !strings.Contains(r.stderr, "127.0.0.1:1")):
			t.Errorf("%s: want a failure to reach %s, got\n%s", tc.how, dead, r)
		case tc.want != "" && (r.code != exitOK || json.Unmarshal([]byte(r.stdout), &st) != nil || st.NATSURL != tc.want):
			t.Errorf("%s: want status of %s, got\n%s", tc.how, tc.want, r)
		}
	}
}

func contextRootEnv(t *testing.T, name, url string) map[string]string {
	return map[string]string{"XDG_CONFIG_HOME": contextRoot(t, name, map[string]string{name: url})}
}

// TestConnectionFlagsRefusedBeforeConnecting: flags that do not go together, an
// unknown context and a missing file are usage errors (exit 2) naming what is wrong.
func TestConnectionFlagsRefusedBeforeConnecting(t *testing.T) {
	root := contextRoot(t, "", map[string]string{"a": "nats://127.0.0.1:1", "bad": "http://nats:4222"})
	missing := filepath.Join(t.TempDir(), "gone")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "abi"}, "--user needs --password or --password-file"},
		{[]string{"--password", "x"}, "--password and --password-file need --user"},
		{[]string{"--creds", missing, "--token", "t"}, "--creds and --token: give one way to log in"},
		{[]string{"--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--context", "nope"}, `natscli context "nope": no such natscli context`},
		{[]string{"--context", "bad"}, `nats.url = "http://nats:4222" (natscli context "bad"): must be`},
		{[]string{"--creds", missing}, "--creds " + missing + ": no such file"},
		{[]string{"--nkey", missing}, "--nkey " + missing + ": no such file"},
		{[]string{"--user", "abi", "--password-file", missing}, "--password-file " + missing},
	} {
		for _, cmd := range [][]string{{"status"}, {"call", "keyvalue", "get"}, {"step-down"}, {"evict", "--force"}, {"doctor"}, {"modules"}, {"bench"}} {
			r := runCLI(t, map[string]string{"XDG_CONFIG_HOME": root}, append(cmd, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s %s: want exit 2 saying %q, got\n%s", cmd[0], strings.Join(tc.args, " "), tc.want, r)
			}
		}
	}
}

// TestStaleSelectedContext: a selected context whose file is gone is an error saying
// so where it would be used, and nothing where the broker is named otherwise.
func TestStaleSelectedContext(t *testing.T) {
	live := natstest.Start(t).URL()
	env := map[string]string{"XDG_CONFIG_HOME": contextRoot(t, "gone", nil)}
	r := runCLI(t, env, "status")
	if r.code != exitUsage || !strings.Contains(r.stderr, `the natscli context selected with nats context select: natscli context "gone": no such natscli context`) {
		t.Errorf("status with a stale selected context: want exit 2 saying so, got\n%s", r)
	}
	wantCode(t, runCLI(t, env, "status", "--nats", live), exitOK)
}

// TestDoctorJSON: doctor --json prints one JSON object with every finding and the
// counts, and exits as doctor does: 0 with nothing failed, 1 with a broker it cannot
// reach (a FAIL finding, still JSON).
func TestDoctorJSON(t *testing.T) {
	srv := natstest.Start(t)
	r := runCLI(t, nil, "doctor", "--json", "--nats", srv.URL())
	var rep doctorJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitOK {
		t.Fatalf("doctor --json (%v):\n%s", err, r)
	}
	if rep.NATSURL != srv.URL() || rep.Fail != 0 || rep.OK+rep.Warn != len(rep.Findings) || rep.Findings[0].Check != "jetstream" || rep.LeaseSeconds <= 0 {
		t.Errorf("doctor --json: %+v", rep)
	}
	for _, f := range rep.Findings {
		if f.Verdict == "WARN" && f.Fix == "" {
			t.Errorf("a WARN without its fix: %+v", f)
		}
	}
	r = runCLI(t, nil, "doctor", "--json", "--nats", "nats://127.0.0.1:1")
	rep = doctorJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitRuntime || rep.Fail != 1 || rep.Findings[0].Check != "broker" {
		t.Errorf("doctor --json without a broker (%v): %+v\n%s", err, rep, r)
	}
}

// TestEveryBrokerCommandTakesTheConnectionFlags: status, step-down, evict, doctor,
// call, modules and bench take every connection flag, and docs/operations.md names
// each of them and each command's --json.
func TestEveryBrokerCommandTakesTheConnectionFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	c, _, _ := cliFor(t, nil)
	root := c.rootCommand()
	names := []string{"config", "nats", "context", "creds", "nkey", "token", "user", "password", "password-file",
		"tls-ca", "tls-cert", "tls-key", "jwt-secret-file"}
	for _, name := range names {
		if !strings.Contains(string(doc), "`--"+name) {
			t.Errorf("docs/operations.md does not name --%s", name)
		}
	}
	for _, use := range []string{"status", "step-down", "evict", "doctor", "call", "modules", "bench"} {
		cmd, _, err := root.Find([]string{use})
		if err != nil || cmd.Name() != use {
			t.Fatalf("no command %s: %v", use, err)
		}
		for _, name := range names {
			if cmd.Flags().Lookup(name) == nil {
				t.Errorf("%s has no --%s", use, name)
			}
		}
	}
	for _, use := range []string{"status", "doctor", "modules", "chaos"} {
		if cmd, _, _ := root.Find([]string{use}); cmd.Flags().Lookup("json") == nil {
			t.Errorf("%s prints a table but has no --json", use)
		}
	}
}

// TestTokenLogin: against a broker that takes a token, status reaches it with --token
// and with a natscli context's token, and a wrong token is refused naming where it came
// from, never the token itself.
func TestTokenLogin(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) { o.Authorization = "t0ken" })
	root := t.TempDir()
	dir := filepath.Join(root, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "tok.json", fmt.Sprintf(`{"url": %q, "token": "t0ken"}`, srv.URL()))
	writeFile(t, dir, "bad.json", fmt.Sprintf(`{"url": %q, "token": "wr0ng"}`, srv.URL()))
	env := map[string]string{"XDG_CONFIG_HOME": root}
	wantCode(t, runCLI(t, env, "status", "--nats", srv.URL(), "--token", "t0ken"), exitOK)
	wantCode(t, runCLI(t, env, "status", "--context", "tok"), exitOK)
	wantCode(t, runCLI(t, env, "status", "--context", "bad", "--token", "t0ken"), exitOK)
	r := runCLI(t, env, "status", "--context", "bad")
	if r.code != exitRuntime || !strings.Contains(r.stderr, `the broker refused the login, a token (from natscli context "bad")`) || strings.Contains(r.stderr, "wr0ng") {
		t.Errorf("a wrong token: want exit 1 naming where it came from, without it, got\n%s", r)
	}
}
