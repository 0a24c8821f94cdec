package config

import (
	"errors"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

// TestDiscoveryConfig: nats.discovery is off when absent, on with the Python engine's
// defaults when empty, and every bad value is named with its key and rule.
func TestDiscoveryConfig(t *testing.T) {
	c, err := Parse([]byte("nats:\n  max_concurrent_requests: 8\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS.Discovery != nil {
		t.Fatalf("absent block: discovery = %+v, want off (nil)", c.NATS.Discovery)
	}
	c, err = Parse([]byte("nats:\n  discovery: {}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.NATS.Discovery; d == nil || d.Project != "default" || d.LeaseSeconds != 20 {
		t.Fatalf("empty block: %+v, want project default and lease 20", d)
	}
	c, err = Parse([]byte("nats:\n  discovery:\n    project: acme_1\n    lease_seconds: 2.5\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.NATS.Discovery; d.Project != "acme_1" || d.Lease().Seconds() != 2.5 {
		t.Fatalf("set block: %+v", d)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"project: a.*", `nats.discovery.project = "a.*" (line 3): must be 1 to 64 letters, digits, '_' or '-'`},
		{`project: ""`, `nats.discovery.project = "" (line 3): must be 1 to 64 letters, digits, '_' or '-'`},
		{"project: " + strings.Repeat("a", 65), "must be 1 to 64 letters"},
		{"lease_seconds: 0", "nats.discovery.lease_seconds = 0 (line 3): must be a finite number of seconds from 1 to 300"},
		{"lease_seconds: .inf", "nats.discovery.lease_seconds = +Inf (line 3): must be a finite"},
		{"lease_seconds: 301", "nats.discovery.lease_seconds = 301"},
		{"lease_seconds: soon", `nats.discovery.lease_seconds = "soon" (line 3): must be`},
		{"replicas: 3", "nats.discovery.replicas (line 3): unknown key; nats.discovery takes project, lease_seconds"},
	} {
		_, err := Parse([]byte("nats:\n  discovery:\n    "+tc.yaml+"\n"), noEnv)
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.yaml, err, tc.want)
		}
	}
}
