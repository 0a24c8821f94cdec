package config

import (
	"strings"
	"testing"
	"time"
)

// TestEmbeddedBrokerSettings: the embedded broker's ping, sync and monitoring keys are
// read and validated like every key, each error naming the key, the value and the rule.
func TestEmbeddedBrokerSettings(t *testing.T) {
	c, err := Parse([]byte("nats:\n  embedded: {ping_interval_seconds: 6, ping_max: 3, sync_always: true, http_listen: \"0.0.0.0:8222\"}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := c.NATS.Embedded
	if e.PingInterval() != 6*time.Second || e.PingMax != 3 || !e.SyncAlways || e.SyncInterval() != 0 || e.HTTPListen != "0.0.0.0:8222" {
		t.Errorf("nats.embedded = %+v", e)
	}
	if got := c.NATS.EmbeddedMonitorURL(); got != "http://127.0.0.1:8222" {
		t.Errorf("EmbeddedMonitorURL() = %q, want http://127.0.0.1:8222", got)
	}
	if d := Default(); d.NATS.Embedded.HTTPListen != "" || d.NATS.EmbeddedMonitorURL() != "" || d.NATS.Embedded.PingInterval() != 0 {
		t.Errorf("the default embedded broker serves monitoring or changes nats-server's ping: %+v", d.NATS.Embedded)
	}
	for _, tc := range []struct{ yaml, key, says string }{
		{"ping_interval_seconds: -1", "nats.embedded.ping_interval_seconds", "0 or more"},
		{"ping_interval_seconds: .inf", "nats.embedded.ping_interval_seconds", "finite"},
		{"ping_max: 101", "nats.embedded.ping_max", "from 0 to 100"},
		{"sync_interval_seconds: -2", "nats.embedded.sync_interval_seconds", "0 or more"},
		{"sync_interval_seconds: 10, sync_always: true", "nats.embedded.sync_interval_seconds", "cannot be set together with nats.embedded.sync_always"},
		{"http_listen: \"8222\"", "nats.embedded.http_listen", "host:port"},
		{"ping_intervall: 6", "nats.embedded.ping_intervall", "unknown"},
	} {
		_, err := Parse([]byte("nats:\n  embedded: {"+tc.yaml+"}\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("nats.embedded {%s}: %v, want an error naming %s saying %q", tc.yaml, err, tc.key, tc.says)
		}
	}
}
