package main

import (
	"strings"
	"testing"
)

const sharedConfig = `
nats:
  url: "nats://nats-0.nats:4222,nats://nats-1.nats:4222"
  engine:
    lease_replicas: 3
services:
  keyvalue: {adapter: postgres, dsn: "postgres://abi@postgres:5432/abi", table: abi_kv}
  object_storage: {adapter: jetstream, bucket: OBJS}
http: {listen: "0.0.0.0:8080"}
`

const localConfig = `
nats:
  embedded: {listen: "127.0.0.1:4222", store_dir: "var/nats"}
services:
  keyvalue: {adapter: bbolt, path: "var/kv.db"}
  object_storage: {adapter: fs, root: "var/objects"}
`

func TestConfigCheckBadValuesNameTheKey(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "bad.yaml", `
nats:
  engine:
    role: boss
    lease_seconds: 0
  max_concurrent_requests: 5000
`)
	r := runCLI(t, nil, "config", "check", "--config", path)
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, path, "3 problems",
		"nats.engine.role", `"boss"`, "nats.engine.lease_seconds", "nats.max_concurrent_requests", "5000", "line 4", "line 5")
	if r.stdout != "" {
		t.Errorf("a failed check printed on stdout: %q", r.stdout)
	}
}

func TestConfigCheckUnknownKeyAndMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "typo.yaml", "nats:\n  engine:\n    leese_seconds: 5\n")
	r := runCLI(t, nil, "config", "check", "--config", path)
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "leese_seconds", "line 3")

	r = runCLI(t, nil, "config", "check", "--config", dir+"/nope.yaml")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "nope.yaml")
}

func TestConfigCheckRolloutWithLocalBackends(t *testing.T) {
	path := writeFile(t, t.TempDir(), "local.yaml", localConfig)
	local := []string{
		"refused for rollout v2",
		"keyvalue: file at var/kv.db",
		"object_storage: files under var/objects",
		"nats: embedded NATS server with its store under var/nats",
	}

	t.Run("flag", func(t *testing.T) {
		r := runCLI(t, nil, "config", "check", "--config", path, "--rollout", "v2")
		wantCode(t, r, exitUsage)
		wantContains(t, "stderr", r.stderr, append(local, "nats.engine.rollout_id", "flag --rollout")...)
	})
	t.Run("environment", func(t *testing.T) {
		r := runCLI(t, map[string]string{"ABI_ROLLOUT_ID": "v2"}, "config", "check", "--config", path)
		wantCode(t, r, exitUsage)
		wantContains(t, "stderr", r.stderr, append(local, "environment variable ABI_ROLLOUT_ID")...)
	})
	t.Run("flag wins over environment", func(t *testing.T) {
		r := runCLI(t, map[string]string{"ABI_ROLLOUT_ID": "v1"}, "config", "check", "--config", path, "--rollout", "v2")
		wantCode(t, r, exitUsage)
		wantContains(t, "stderr", r.stderr, local...)
	})
	t.Run("with another problem", func(t *testing.T) {
		bad := writeFile(t, t.TempDir(), "bad.yaml", localConfig+"log: {format: xml}\n")
		r := runCLI(t, nil, "config", "check", "--config", bad, "--rollout", "v2")
		wantCode(t, r, exitUsage)
		wantContains(t, "stderr", r.stderr, append(local, "log.format", `"xml"`, "2 problems")...)
	})
	t.Run("without a rollout it is fine", func(t *testing.T) {
		r := runCLI(t, nil, "config", "check", "--config", path)
		wantCode(t, r, exitOK)
		wantContains(t, "stdout", r.stdout, "ok: "+path, "rollout:", "none",
			"bbolt: file at var/kv.db (this host)", "fs: files under var/objects (this host)",
			"embedded NATS server on 127.0.0.1:4222, store under var/nats (this host)",
			"keyvalue, nats, object_storage keep their data on this host", "a rollout id would be refused")
	})
}

func TestConfigCheckOK(t *testing.T) {
	path := writeFile(t, t.TempDir(), "shared.yaml", sharedConfig)
	r := runCLI(t, nil, "config", "check", "--config", path, "--rollout", "2026.05.01-abc")
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout,
		"ok: "+path,
		"role:", "serve",
		"rollout:", "2026.05.01-abc",
		"nats://nats-0.nats:4222, nats://nats-1.nats:4222",
		"keyvalue:", "postgres: table abi_kv (shared)",
		"object_storage:", "jetstream: object store OBJS on the NATS server (shared)",
		"http:", "0.0.0.0:8080",
		"every service is shared: rollout 2026.05.01-abc can hand over without downtime")
	if r.stderr != "" {
		t.Errorf("a passing check printed on stderr: %q", r.stderr)
	}
	if strings.Contains(r.stdout, "postgres://") {
		t.Errorf("the summary prints the DSN, which may hold credentials:\n%s", r.stdout)
	}
}

func TestConfigCheckDefaultsAndRoles(t *testing.T) {
	t.Chdir(t.TempDir()) // no abi-engine.yaml here
	r := runCLI(t, nil, "config", "check")
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "ok: the defaults", "role:", "serve", "rollout:", "none",
		"jetstream: JetStream KV bucket ABI_KV on the embedded NATS server, stored under data/nats (this host)")

	// A client opens no backend, so no rollout can be refused for one.
	r = runCLI(t, map[string]string{"ABI_ENGINE_ROLE": "client"}, "config", "check", "--rollout", "v2")
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "client", "a client engine opens no backend")

	// abi-engine.yaml in the working directory is read when --config is not given.
	writeFile(t, ".", "abi-engine.yaml", sharedConfig)
	r = runCLI(t, nil, "config", "check", "--rollout", "v3")
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "ok: abi-engine.yaml", "rollout v3 can hand over")
}

func TestConfigCheckRolloutFlagIsValidated(t *testing.T) {
	path := writeFile(t, t.TempDir(), "shared.yaml", sharedConfig)
	r := runCLI(t, nil, "config", "check", "--config", path, "--rollout", "bad rollout!")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "nats.engine.rollout_id", `"bad rollout!"`, "flag --rollout")
	wantContains(t, "stderr", r.stderr, "not refused by what could be checked")
}

// TestConfigCheckJetStreamDomain: config check says which JetStream holds the lease and
// the buckets, and names nats.jetstream.domain when its value cannot be a domain.
func TestConfigCheckJetStreamDomain(t *testing.T) {
	dir := t.TempDir()
	ok := writeFile(t, dir, "hub.yaml", "nats:\n  url: nats://leaf-a:4222\n  jetstream: {domain: hub}\n")
	r := runCLI(t, nil, "config", "check", "--config", ok)
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "jetstream:", "domain hub: the lease bucket ABI_ENGINE and the jetstream buckets")
	bad := writeFile(t, dir, "bad.yaml", "nats:\n  url: nats://leaf-a:4222\n  jetstream: {domain: hub.a}\n")
	r = runCLI(t, nil, "config", "check", "--config", bad)
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, `nats.jetstream.domain = "hub.a" (line 3)`, "JetStream domain name")
}
