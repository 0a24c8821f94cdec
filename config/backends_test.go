package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestLocalStorage(t *testing.T) {
	kv := []struct {
		cfg  KeyValue
		want string
	}{
		{KeyValue{Adapter: KeyValueMemory}, "this process"},
		{KeyValue{Adapter: KeyValueBolt, Path: DefaultBoltPath}, "file at data/kv.db"},
		{KeyValue{Adapter: KeyValueBolt, Path: "/var/lib/abi/kv.db"}, "file at /var/lib/abi/kv.db"},
		{KeyValue{Adapter: KeyValueJetStream, Bucket: "ABI_KV"}, ""},
		{KeyValue{Adapter: KeyValuePostgres, DSN: "postgres://db/abi"}, ""},
	}
	for _, tc := range kv {
		if got := tc.cfg.LocalStorage(); got != tc.want {
			t.Errorf("keyvalue %s: LocalStorage() = %q, want %q", tc.cfg.Adapter, got, tc.want)
		}
	}
	obj := []struct {
		cfg  ObjectStorage
		want string
	}{
		{ObjectStorage{Adapter: ObjectStorageMemory}, "this process"},
		{ObjectStorage{Adapter: ObjectStorageFS, Root: DefaultObjectsRoot}, "files under data/objects"},
		{ObjectStorage{Adapter: ObjectStorageFS, Root: "/srv/objects"}, "files under /srv/objects"},
		{ObjectStorage{Adapter: ObjectStorageJetStream, Bucket: "ABI_OBJECTS"}, ""},
	}
	for _, tc := range obj {
		if got := tc.cfg.LocalStorage(); got != tc.want {
			t.Errorf("object_storage %s: LocalStorage() = %q, want %q", tc.cfg.Adapter, got, tc.want)
		}
	}
}

func TestLocalBackends(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []LocalBackend
	}{
		{"shared broker, jetstream", "nats: {url: nats://n:4222}\n", nil},
		{"shared broker, postgres", "nats: {url: nats://n:4222}\nservices:\n  keyvalue: {adapter: postgres, dsn: x}\n", nil},
		{"shared broker, local adapters", "nats: {url: nats://n:4222}\nservices:\n  keyvalue: {adapter: bbolt}\n  object_storage: {adapter: fs}\n", []LocalBackend{
			{"keyvalue", "file at data/kv.db"},
			{"object_storage", "files under data/objects"},
		}},
		{"shared broker, memory", "nats: {url: nats://n:4222}\nservices:\n  keyvalue: {adapter: memory}\n  object_storage: {adapter: memory}\n", []LocalBackend{
			{"keyvalue", "this process"},
			{"object_storage", "this process"},
		}},
		{"embedded broker, jetstream", "nats: {embedded: {store_dir: /tmp/js}}\n", []LocalBackend{
			{"keyvalue", "JetStream KV bucket ABI_KV on the embedded NATS server, stored under /tmp/js"},
			{"nats", "embedded NATS server with its store under /tmp/js"},
			{"object_storage", "JetStream object store ABI_OBJECTS on the embedded NATS server, stored under /tmp/js"},
		}},
		{"embedded broker, postgres and fs", "services:\n  keyvalue: {adapter: postgres, dsn: x}\n  object_storage: {adapter: fs}\n", []LocalBackend{
			{"nats", "embedded NATS server with its store under data/nats"},
			{"object_storage", "files under data/objects"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.yaml, nil)
			if got := c.LocalBackends(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("LocalBackends()\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCheckSharedBackends(t *testing.T) {
	const (
		sharedBroker = "nats: {url: nats://n:4222}\n"
		localAdapter = "services:\n  keyvalue: {adapter: bbolt}\n  object_storage: {adapter: fs}\n"
	)
	cases := []struct {
		name    string
		yaml    string
		role    Role
		rollout string
		refused []string // services named in the refusal; nil when the check passes
	}{
		{"rollout with local adapters is refused naming each", sharedBroker + localAdapter, RoleServe, "v2", []string{"keyvalue: file at data/kv.db", "object_storage: files under data/objects"}},
		{"rollout with the embedded broker is refused", "", RoleServe, "v2", []string{"keyvalue: JetStream KV bucket ABI_KV on the embedded NATS server", "nats: embedded NATS server with its store under data/nats", "object_storage: JetStream object store"}},
		{"rollout with one local adapter names only it", sharedBroker + "services:\n  keyvalue: {adapter: memory}\n", RoleServe, "v2", []string{"keyvalue: this process"}},
		{"rollout with shared backends passes", sharedBroker + "services:\n  keyvalue: {adapter: postgres, dsn: x}\n", RoleServe, "v2", nil},
		{"rollout with jetstream on a shared broker passes", sharedBroker, RoleServe, "v2", nil},
		{"no rollout with local adapters passes", localAdapter, RoleServe, "", nil},
		{"client with a rollout and local adapters passes", localAdapter, RoleClient, "v2", nil},
		{"auto with a rollout and local adapters passes", localAdapter, RoleAuto, "v2", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.yaml, nil)
			c.NATS.Engine.Role, c.NATS.Engine.RolloutID = tc.role, tc.rollout
			err := c.CheckSharedBackends()
			if tc.refused == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var local *LocalBackendsError
			if !errors.As(err, &local) {
				t.Fatalf("got %v, want a *LocalBackendsError", err)
			}
			if local.RolloutID != tc.rollout || len(local.Local) != len(tc.refused) {
				t.Fatalf("error carries rollout %q and %d services, want %q and %d: %+v", local.RolloutID, len(local.Local), tc.rollout, len(tc.refused), local)
			}
			msg := err.Error()
			for _, part := range append([]string{"rollout " + tc.rollout, "shared backend", "without a rollout id", "jetstream or postgres"}, tc.refused...) {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not contain %q", msg, part)
				}
			}
		})
	}
}

func TestLoadRunsTheSharedBackendCheck(t *testing.T) {
	env := envOf(map[string]string{EnvRolloutID: "v7", EnvNATSURL: "nats://n:4222"})
	_, err := Parse([]byte("services:\n  keyvalue: {adapter: bbolt, path: kv.db}\n"), env)
	var local *LocalBackendsError
	if !errors.As(err, &local) || !reflect.DeepEqual(local.Local, []LocalBackend{{"keyvalue", "file at kv.db"}}) {
		t.Fatalf("got %v, want a *LocalBackendsError for keyvalue", err)
	}
	is := oneIssue(t, "rollout on bbolt", err)
	if is.Key != "nats.engine.rollout_id" || is.Value != `"v7"` || is.Origin != "environment variable ABI_ROLLOUT_ID" {
		t.Fatalf("issue %+v", is)
	}

	// Reported next to the other problems, so config check shows them all at once.
	_, err = Parse([]byte("services:\n  keyvalue: {adapter: memory}\nlog: {level: loud}\n"), env)
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Issues) != 2 || !errors.As(err, &local) {
		t.Fatalf("got %v, want the log level and the local keyvalue", err)
	}

	// A verdict about misconfigured backends would only confuse: fix them first.
	_, err = Parse([]byte("services:\n  keyvalue: {adapter: redis}\n"), env)
	if errors.As(err, &local) || len(oneIssueOf(t, err)) != 1 {
		t.Fatalf("got %v, want only the adapter problem", err)
	}

	// A flag that makes the engine a client lifts the refusal.
	if _, err := Parse([]byte("services:\n  keyvalue: {adapter: memory}\n"), env, RoleFlag("client")); err != nil {
		t.Fatalf("client: %v", err)
	}
}

func oneIssueOf(t *testing.T, err error) []Issue {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v, want *Error", err)
	}
	return cerr.Issues
}

// TestHotStandbyNeedsSharedBackends: a hot standby takes over another engine's data,
// so like a rollout it is refused with a local backend, naming the key.
func TestHotStandbyNeedsSharedBackends(t *testing.T) {
	c, err := Parse([]byte("nats: {url: nats://127.0.0.1:4222, engine: {standby: hot}}\nservices:\n  keyvalue: {adapter: bbolt}\n"), nil)
	if err == nil {
		t.Fatalf("a hot standby with bbolt passed: %+v", c)
	}
	if msg := err.Error(); !strings.Contains(msg, "nats.engine.standby") || !strings.Contains(msg, "keyvalue") {
		t.Fatalf("error %q does not name nats.engine.standby and the service", msg)
	}
	if _, err := Parse([]byte("nats: {url: nats://127.0.0.1:4222, engine: {standby: hot}}\n"), nil); err != nil {
		t.Fatalf("a hot standby on shared backends: %v", err)
	}
}
