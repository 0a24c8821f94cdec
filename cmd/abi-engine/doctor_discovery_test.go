package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/discovery"
	"github.com/abi-engine/engine/internal/natstest"
)

// TestDoctorChecksDiscoveryBucket: with nats.discovery on, doctor judges the registry's
// bucket: missing or as the engine makes it OK, a TTL or memory storage FAIL, a history
// other than 1 WARN, each with its fix; without nats.discovery it is not checked.
func TestDoctorChecksDiscoveryBucket(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	dir := t.TempDir()
	config := func(project string) string {
		return writeFile(t, dir, project+".yaml", "nats:\n  discovery: {project: "+project+"}\n")
	}
	ctx := context.Background()

	r := runCLI(t, nil, "doctor", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	if l := doctorLine(r.stdout, "discovery bucket"); l != "" {
		t.Fatalf("discovery bucket checked without nats.discovery: %q", l)
	}

	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--config", config("good"))
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "discovery bucket", "OK", "ABI_DISCOVERY_good does not exist yet: the serving engine creates it with history 1, file storage, no TTL, R1")
	if _, err := discovery.OpenJetStream(ctx, natstest.Connect(t, srv.URL()), "good", 1); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--config", config("good"))
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "discovery bucket", "OK", "stream KV_ABI_DISCOVERY_good: history 1, file storage, no TTL, R1")

	j := js(t, srv.URL())
	if _, err := j.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ABI_DISCOVERY_lossy", History: 1,
		Storage: jetstream.MemoryStorage, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--config", config("lossy"))
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "discovery bucket", "FAIL", "discovery bucket ABI_DISCOVERY_lossy (stream KV_ABI_DISCOVERY_lossy)",
		"storage is memory (want file)", "ttl (max age) is 1m0s (want none)", "every module's registration",
		"fix: nats stream edit KV_ABI_DISCOVERY_lossy --max-age 0", "nats kv del ABI_DISCOVERY_lossy")

	if _, err := j.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ABI_DISCOVERY_deep", History: 5}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--config", config("deep"))
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "discovery bucket", "WARN", "stream KV_ABI_DISCOVERY_deep keeps 5 revision(s) of the registry, want 1",
		"fix: nats stream edit KV_ABI_DISCOVERY_deep --max-msgs-per-subject 1")
}
