package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJetStreamDomain: nats.jetstream.domain is read from the file, and a value that
// cannot be a domain (a dot, a space, a wildcard) is refused naming the key, the value,
// its line and the rule.
func TestJetStreamDomain(t *testing.T) {
	dir := t.TempDir()
	write := func(doc string) string {
		path := filepath.Join(dir, "abi-engine.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	c, err := Load(write("nats:\n  url: nats://127.0.0.1:4222\n  jetstream: {domain: hub}\n"), nil)
	if err != nil || c.NATS.JetStream.Domain != "hub" {
		t.Fatalf("Load = %+v, %v; want domain hub", c.NATS.JetStream, err)
	}
	if c, err := Load(write("nats: {url: nats://127.0.0.1:4222}\n"), nil); err != nil || c.NATS.JetStream.Domain != "" {
		t.Fatalf("default: %q, %v", c.NATS.JetStream.Domain, err)
	}
	for _, bad := range []string{"a.b", "a b", "*", ">", "hub\\t"} {
		_, err := Load(write("nats:\n  url: nats://127.0.0.1:4222\n  jetstream:\n    domain: \""+bad+"\"\n"), nil)
		if err == nil {
			t.Fatalf("domain %q was accepted", bad)
		}
		for _, want := range []string{"nats.jetstream.domain", "line 4", "JetStream domain name"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("domain %q: error %q does not say %q", bad, err, want)
			}
		}
	}
	if _, err := Load(write("nats:\n  jetstream: {domian: hub}\n"), nil); err == nil || !strings.Contains(err.Error(), "nats.jetstream.domian") {
		t.Fatalf("an unknown key under nats.jetstream: %v", err)
	}
}
