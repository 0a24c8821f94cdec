package config

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// nest writes key (a dotted path) with value as nested YAML; the value is on line
// len(strings.Split(key, ".")).
func nest(key, value string) string {
	parts := strings.Split(key, ".")
	var b strings.Builder
	for i, p := range parts[:len(parts)-1] {
		b.WriteString(strings.Repeat("  ", i) + p + ":\n")
	}
	b.WriteString(strings.Repeat("  ", len(parts)-1) + parts[len(parts)-1] + ": " + value + "\n")
	return b.String()
}

func mustParse(t *testing.T, yaml string, env func(string) string, overrides ...Override) *Config {
	t.Helper()
	c, err := Parse([]byte(yaml), env, overrides...)
	if err != nil {
		t.Fatalf("Parse(%q): %v", yaml, err)
	}
	return c
}

func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestDefaults(t *testing.T) {
	for name, load := range map[string]func() (*Config, error){
		"Default":    func() (*Config, error) { return Default(), nil },
		"empty file": func() (*Config, error) { return Parse(nil, nil) },
		"comments only": func() (*Config, error) {
			return Parse([]byte("# nothing here\n"), nil)
		},
		"empty blocks": func() (*Config, error) {
			return Parse([]byte("nats:\n  engine:\n  embedded:\nservices:\n  keyvalue:\nhttp:\nlog:\n"), nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := load()
			if err != nil {
				t.Fatal(err)
			}
			want := Config{
				NATS: NATS{
					URL:                   "",
					Embedded:              Embedded{Listen: "127.0.0.1:4222", StoreDir: "data/nats"},
					Credentials:           "",
					ClientTimeoutSeconds:  10,
					MaxConcurrentRequests: 64,
					ConnectTimeoutSeconds: 5,
					Engine: Engine{
						Role: RoleServe, RolloutID: "", LeaseSeconds: 20,
						StandbyTimeoutSeconds: 900, DrainSeconds: 60, LeaseReplicas: 1, Standby: StandbyOff,
					},
				},
				Services: Services{
					KeyValue:      KeyValue{Adapter: KeyValueJetStream, Path: "data/kv.db", Bucket: "ABI_KV", Table: "abi_keyvalue"},
					ObjectStorage: ObjectStorage{Adapter: ObjectStorageJetStream, Root: "data/objects", Bucket: "ABI_OBJECTS"},
				},
				HTTP:      HTTP{Listen: "127.0.0.1:8080"},
				Log:       Log{Level: "info", Format: "auto"},
				Telemetry: Telemetry{SampleRatio: 1, ServiceName: "abi-engine"},
				Limits: Limits{MemoryMiB: 256, ClientMemoryMiB: 64, SessionMemoryMiB: 64, RequestUploadMiB: 256, Sessions: 64, ClientSessions: 8,
					SessionIdleSeconds: 60, SessionMaxSeconds: 900},
			}
			got := *c
			got.origins, got.path = nil, ""
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("defaults\n got %+v\nwant %+v", got, want)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("defaults do not validate: %v", err)
			}
			if !c.NATS.EmbeddedBroker() || c.NATS.Servers() != nil {
				t.Fatalf("default broker: embedded=%v servers=%v", c.NATS.EmbeddedBroker(), c.NATS.Servers())
			}
		})
	}
}

func TestDurations(t *testing.T) {
	c := mustParse(t, `
nats:
  client_timeout_seconds: 2.5
  connect_timeout_seconds: 1.5
  engine: {lease_seconds: 8, standby_timeout_seconds: 60, drain_seconds: 0}
`, nil)
	for _, tc := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"ClientTimeout", c.NATS.ClientTimeout(), 2500 * time.Millisecond},
		{"Lease", c.NATS.Engine.Lease(), 8 * time.Second},
		{"StandbyTimeout", c.NATS.Engine.StandbyTimeout(), time.Minute},
		{"Drain", c.NATS.Engine.Drain(), 0},
		{"default Lease", Default().NATS.Engine.Lease(), 20 * time.Second},
		{"default StandbyTimeout", Default().NATS.Engine.StandbyTimeout(), 15 * time.Minute},
		{"default Drain", Default().NATS.Engine.Drain(), time.Minute},
		{"default ClientTimeout", Default().NATS.ClientTimeout(), 10 * time.Second},
		{"ConnectTimeout", c.NATS.ConnectTimeout(), 1500 * time.Millisecond},
		{"default ConnectTimeout", Default().NATS.ConnectTimeout(), 5 * time.Second},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// A valid but huge standby timeout saturates instead of wrapping negative.
	huge := Engine{StandbyTimeoutSeconds: 1e300}
	if got := huge.StandbyTimeout(); got != time.Duration(math.MaxInt64) {
		t.Errorf("StandbyTimeout(1e300) = %v, want the largest Duration", got)
	}
}

func TestServers(t *testing.T) {
	c := mustParse(t, `nats: {url: "nats://a:4222, tls://b:4443 ,wss://c/ws"}`, nil)
	want := []string{"nats://a:4222", "tls://b:4443", "wss://c/ws"}
	if got := c.NATS.Servers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Servers() = %q, want %q", got, want)
	}
	if c.NATS.EmbeddedBroker() {
		t.Fatal("EmbeddedBroker() with a URL")
	}
}

func TestLeaseRolloutID(t *testing.T) {
	for _, tc := range []struct {
		role Role
		want string
	}{
		{RoleServe, "v2"},
		{RoleAuto, ""}, // auto never stands by (docs/decision.md, "Three roles")
		{RoleClient, ""},
	} {
		e := Engine{Role: tc.role, RolloutID: "v2"}
		if got := e.LeaseRolloutID(); got != tc.want {
			t.Errorf("role %s: LeaseRolloutID() = %q, want %q", tc.role, got, tc.want)
		}
	}
}

func TestExampleFile(t *testing.T) {
	const path = "testdata/abi-engine.example.yaml"
	c, err := Load(path, envOf(map[string]string{EnvRolloutID: "v2026.1"}))
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if c.Path() != path {
		t.Errorf("Path() = %q, want %q", c.Path(), path)
	}
	if got := len(c.NATS.Servers()); got != 3 {
		t.Errorf("example servers = %d, want 3", got)
	}
	if c.NATS.Engine.LeaseReplicas != 3 || c.Services.KeyValue.Adapter != KeyValuePostgres ||
		c.Services.KeyValue.DSN == "" || c.HTTP.Listen != "0.0.0.0:8080" {
		t.Errorf("example not read as written: %+v", c)
	}
	// The example is a zero-downtime deploy: its rollout passes the shared-backend check.
	if c.NATS.Engine.RolloutID != "v2026.1" {
		t.Errorf("rollout = %q, want the environment's", c.NATS.Engine.RolloutID)
	}
	if err := c.CheckSharedBackends(); err != nil {
		t.Errorf("the example's backends are not shared: %v", err)
	}
}

// TestDocumentsEveryKey keeps doc.go, the user's reference, in step with the struct.
func TestDocumentsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range leafKeys(reflect.TypeFor[Config](), "") {
		name := key
		if strings.HasPrefix(key, "services.") && !strings.HasSuffix(key, ".adapter") {
			// Adapter options are listed under their service by their own name.
			name = "  - " + key[strings.LastIndex(key, ".")+1:] + " ("
		}
		if !strings.Contains(string(doc), name) {
			t.Errorf("doc.go does not document %s (looked for %q)", key, name)
		}
	}
}

func leafKeys(t reflect.Type, path string) []string {
	if t.Kind() != reflect.Struct {
		return []string{path}
	}
	fields, _ := fieldsOf(t)
	var out []string
	for name, ft := range fields {
		out = append(out, leafKeys(ft, join(path, name))...)
	}
	return out
}
