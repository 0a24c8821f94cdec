package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// TestAPasswordOfEveryPrintableCharacterIsNeverPrinted is issue 26 finding 8: a real
// user semi whose password holds every printable ASCII character (so ; ( ' , @ / and
// the rest, which ended the redaction of a URL before its @) logs in through a
// percent-encoded URL, alone and as the second of a list; status, call, config check,
// doctor and a run through a broker restart (the "nats reconnected" line) print the
// password in no spelling: raw, percent-encoded, or escaped by %q or JSON, whole or
// any 12 characters of it.
func TestAPasswordOfEveryPrintableCharacterIsNeverPrinted(t *testing.T) {
	var b strings.Builder
	for c := byte(0x20); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	password := b.String()
	srv := natstest.Start(t, withUser("semi", password))
	// net/url leaves a comma raw in user info, and nats.go splits a list at commas:
	// the operator writes it %2C.
	login := strings.ReplaceAll(url.UserPassword("semi", password).String(), ",", "%2C")
	good := fmt.Sprintf("nats://%s@%s", login, srv.Addr())
	wrong := fmt.Sprintf("nats://%s%%21@%s", login, srv.Addr()) // one character more: refused
	list := fmt.Sprintf("nats://127.0.0.1:%d, %s", testproc.FreePort(t), good)
	if strings.Contains(good, password) {
		t.Fatal("the URL does not encode the password")
	}

	spellings := func(s string) []string {
		js, _ := json.Marshal(s)
		return []string{s, url.QueryEscape(s), url.PathEscape(s), strings.TrimPrefix(url.UserPassword("u", s).String(), "u:"),
			strings.Trim(strconv.Quote(s), `"`), strings.Trim(string(js), `"`)}
	}
	var pieces []string
	for _, sp := range spellings(password) {
		for i := 0; i+12 <= len(sp); i++ {
			pieces = append(pieces, sp[i:i+12])
		}
	}
	var outputs []string
	check := func(what, out string) {
		t.Helper()
		outputs = append(outputs, out)
		for _, p := range pieces {
			if strings.Contains(out, p) {
				t.Errorf("%s printed %q of the password:\n%s", what, p, out)
				return
			}
		}
	}
	dir := t.TempDir()
	config := func(natsURL string, extra ...string) string {
		return writeConfig(t, t.TempDir(), fmt.Sprintf("nats:\n  url: %q\n  connect_timeout_seconds: 1\n  engine: {lease_seconds: 2, drain_seconds: 1}\n%s", natsURL, strings.Join(extra, "")))
	}

	// A run through a broker restart: the connected URL and "nats reconnected".
	port := testproc.FreePort(t)
	p := startArgs(t, "engine", dir, port, nil, "run", "--config", config(list, fmt.Sprintf("http: {listen: \"127.0.0.1:%d\"}\nlog: {level: debug}\n", port)))
	p.waitState("serving", 30*time.Second)
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

	for _, args := range [][]string{
		{"status", "--nats", good},
		{"status", "--nats", list, "--json"},
		{"status", "--nats", wrong},
		{"call", "keyvalue", "set", `{"key":"k","value":"dg=="}`, "--nats", list},
		{"call", "keyvalue", "get", `{"key":"k"}`, "--nats", wrong},
		{"call", "nosuch", "get", `{"key":"k"}`, "--nats", good, "--timeout", "1s"},
		{"config", "check", "--config", config(list)},
		{"config", "check", "--config", config(good + ",nats://semi:x@host:99999")},
		{"doctor", "--config", config(list)},
		{"doctor", "--nats", wrong, "--config", config(good)},
	} {
		code, out := runCommand(t, dir, nil, args...)
		check(fmt.Sprintf("%s (exit %d)", strings.Join(args[:2], " "), code), out)
	}
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(30 * time.Second); code != 0 {
		t.Errorf("the engine exited %d", code)
	}
	check("the log of a run", p.out.String())

	// The grep had something to grep: the masked URLs, the reconnection, the user.
	all := strings.Join(outputs, "\n")
	for _, s := range []string{"nats://semi:xxxxx@", "nats reconnected", "Authorization Violation"} {
		if !strings.Contains(all, s) {
			t.Errorf("no output says %q; was anything printed?\n%.3000s", s, all)
		}
	}
}
