package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/testproc"
)

// TestProcessDoctorOnTheEmbeddedBroker: on an engine's embedded broker, doctor reads the
// server's varz at nats.embedded.http_listen by itself, and its fixes for the ping
// interval and fsync name the nats.embedded keys that set them (the embedded broker has
// no server configuration file to edit). Applied as written, they reach the server: a
// second engine with them passes both checks.
func TestProcessDoctorOnTheEmbeddedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	embedded := func(extra string) string {
		return fmt.Sprintf("nats:\n  embedded: {listen: \"127.0.0.1:%d\", http_listen: \"127.0.0.1:%d\"%s}\n", testproc.FreePort(t), testproc.FreePort(t), extra)
	}
	doctor := func(cfg string) result {
		t.Helper()
		e := startEngine(t, cfg)
		e.waitReady(t)
		r := runCLI(t, nil, "doctor", "--config", writeFile(t, t.TempDir(), "abi-engine.yaml", cfg))
		wantCode(t, r, exitOK)
		return r
	}

	r := doctor(embedded(""))
	wantVerdict(t, r, "ping interval", "WARN", "ping_interval 2m0s, ping_max 2",
		"fix: set nats.embedded.ping_interval_seconds: 6 in the engine's configuration")
	wantVerdict(t, r, "fsync", "WARN", "sync_interval 2m0s with an R1 lease bucket", "fix: set nats.embedded.sync_always: true in the engine's configuration")
	for _, unappliable := range []string{"in the server's configuration", "jetstream block", "3-node cluster"} {
		if strings.Contains(r.stdout, unappliable) {
			t.Errorf("doctor advises the embedded broker what it cannot take (%q):\n%s", unappliable, r.stdout)
		}
	}

	r = doctor(embedded(", ping_interval_seconds: 6, sync_always: true"))
	wantVerdict(t, r, "ping interval", "OK", "ping_interval 6s, ping_max 2")
	wantVerdict(t, r, "fsync", "OK", "sync_interval always")
}
