package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
)

// wantNoErrorLines fails on a log line at error (or above) or one carrying a Go stack
// trace: what the process logged is a normal event, not one that needs a person.
func wantNoErrorLines(t *testing.T, what, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			continue
		}
		if lvl, _ := rec["level"].(string); lvl == "error" || lvl == "dpanic" || lvl == "panic" || lvl == "fatal" {
			t.Errorf("%s logged at %s: %s", what, lvl, line)
		}
		if _, ok := rec["stacktrace"]; ok {
			t.Errorf("%s logged a stack trace: %s", what, line)
		}
	}
}

// TestProcessRefusalAndClientRoleAreNoErrors: a second engine refused, and an auto
// engine that becomes a client of the serving one, are normal events. Neither logs at
// error nor a stack trace, both name the holder, and the auto engine counts its role as
// event="client", not as the refusal the alert rules watch.
func TestProcessRefusalAndClientRoleAreNoErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	first := startEngine(t, sharedEngineConfig(srv.URL()))
	first.waitReady(t)
	holder := first.status(t).InstanceID

	second := startEngine(t, sharedEngineConfig(srv.URL()))
	if code := second.wait(t, 60*time.Second); code != exitServing {
		t.Fatalf("the second engine exited %d, want 3:\n%s", code, second.stderr)
	}
	out := second.stderr.String()
	wantNoErrorLines(t, "the refused engine", out)
	wantContains(t, "the refused engine's log", out, `"event":"refused"`, `"holder":"`+holder)

	auto := startEngine(t, "nats: {url: \""+srv.URL()+"\", engine: {role: auto, lease_seconds: 2, drain_seconds: 1}}\n")
	auto.waitReady(t)
	var metrics string
	testwait.For(t, 30*time.Second, "the auto engine's /metrics", func() bool {
		code, body := httpGet(auto.base + "/metrics")
		metrics = body
		return code == http.StatusOK
	})
	wantContains(t, "the auto engine's /metrics", metrics, `abi_engine_lease_events_total{event="client"} 1`)
	if strings.Contains(metrics, `abi_engine_lease_events_total{event="refused"}`) {
		t.Errorf("the auto engine counted its client role as a refusal:\n%s", grepLines(metrics, "lease_events"))
	}
	auto.signal(t, syscall.SIGTERM)
	if code := auto.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the auto engine exited %d after SIGTERM, want 0:\n%s", code, auto.stderr)
	}
	out = auto.stderr.String()
	wantNoErrorLines(t, "the auto engine", out)
	wantContains(t, "the auto engine's log", out, "this auto engine is a client", `"holder":"`+holder)
	if strings.Contains(out, `"level":"warn"`) {
		t.Errorf("the auto engine warned although becoming a client is its role:\n%s", out)
	}

	first.signal(t, syscall.SIGTERM)
	if code := first.wait(t, 60*time.Second); code != exitOK {
		t.Fatalf("the first engine exited %d after SIGTERM, want 0:\n%s", code, first.stderr)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
