package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUnknownKeys(t *testing.T) {
	cases := []struct {
		yaml  string
		key   string
		line  int
		takes string
	}{
		{"nats:\n  engine:\n    lease: 20\n", "nats.engine.lease", 3, "nats.engine takes role, rollout_id, lease_seconds, standby_timeout_seconds, drain_seconds, lease_replicas"},
		{"nats:\n  urls: nats://a\n", "nats.urls", 2, "nats takes url, embedded, credentials, client_timeout_seconds, max_concurrent_requests, engine"},
		{"services:\n  kv: {adapter: memory}\n", "services.kv", 2, "services takes keyvalue, object_storage"},
		{"services:\n  keyvalue: {adapter: memory, ttl: 3}\n", "services.keyvalue.ttl", 2, "takes adapter, path, bucket, replicas, dsn, table"},
		{"# comment\nlogging: {level: debug}\n", "logging", 2, "the top level takes nats, services, http, log"},
		// A key the yaml package might know under another spelling is still unknown.
		{"HTTP: {listen: \":1\"}\n", "HTTP", 1, "the top level takes"},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), nil)
			is := oneIssue(t, tc.yaml, err)
			if is.Key != tc.key || is.Line != tc.line || !strings.Contains(is.Rule, "unknown key") || !strings.Contains(is.Rule, tc.takes) {
				t.Fatalf("issue %+v, want unknown key %s at line %d listing %q", is, tc.key, tc.line, tc.takes)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.key) || !strings.Contains(msg, "unknown key") {
				t.Errorf("message %q does not name the key", msg)
			}
		})
	}
}

func TestStrictDocument(t *testing.T) {
	cases := []struct {
		name, yaml, key, rule string
		line                  int
	}{
		{"key set twice", "nats:\n  engine:\n    role: client\n    role: serve\n", "nats.engine.role", "is set twice (first at line 3)", 4},
		{"block set twice", "log: {level: info}\nlog: {level: debug}\n", "log", "is set twice (first at line 1)", 2},
		{"not YAML", "nats: [\n", "", "not valid YAML: line", 0},
		{"tab indentation", "nats:\n\turl: x\n", "", "not valid YAML", 0},
		{"two documents", "log: {level: info}\n---\nlog: {level: debug}\n", "", "one YAML document", 0},
		{"merge set twice", "nats:\n  engine:\n    <<: {role: client}\n    <<: {lease_seconds: 3}\n", "nats.engine.<<", "is set twice (first at line 3)", 4},
		{"merge of a scalar", "nats:\n  engine:\n    <<: 3\n", "", "", 0}, // the decoder's own words
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), nil)
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got %v, want *Error", err)
			}
			is := cerr.Issues[0]
			if is.Key != tc.key || is.Line != tc.line || !strings.Contains(is.Rule, tc.rule) || is.Rule == "" {
				t.Fatalf("issue %+v, want key %q line %d with %q", is, tc.key, tc.line, tc.rule)
			}
		})
	}
}

func TestNullKeepsDefault(t *testing.T) {
	c := mustParse(t, "nats:\n  url:\n  engine:\n    rollout_id:\n    lease_seconds:\nhttp: {listen: }\n", nil)
	if c.NATS.URL != "" || c.NATS.Engine.LeaseSeconds != 20 || c.HTTP.Listen != "127.0.0.1:8080" {
		t.Fatalf("keys without a value changed defaults: %+v", c)
	}
	c = mustParse(t, `http: {listen: ""}`, nil)
	if c.HTTP.Listen != "" {
		t.Fatalf(`listen: "" gave %q, want HTTP off`, c.HTTP.Listen)
	}
}

func TestMergeKeys(t *testing.T) {
	// Anchors and merges are plain YAML; keys of the mapping itself win over merged ones.
	c := mustParse(t, `
nats:
  engine: &engine
    role: client
    lease_seconds: 5
services:
  keyvalue:
    <<: {adapter: bbolt, path: merged.db}
    path: own.db
`, nil)
	if c.Services.KeyValue.Adapter != KeyValueBolt || c.Services.KeyValue.Path != "own.db" {
		t.Fatalf("merge gave %+v", c.Services.KeyValue)
	}
	_, err := Parse([]byte("services:\n  keyvalue:\n    <<: {adapter: memory, size: 3}\n"), nil)
	if is := oneIssue(t, "merged unknown key", err); is.Key != "services.keyvalue.size" || is.Line != 3 {
		t.Fatalf("merged unknown key: %+v", is)
	}
}

func TestEnvironment(t *testing.T) {
	file := "nats:\n  url: nats://file:4222\n  engine: {role: serve, rollout_id: file}\n"
	cases := []struct {
		name string
		env  map[string]string
		role Role
		roll string
		url  string
	}{
		{"no environment", nil, RoleServe, "file", "nats://file:4222"},
		{"role", map[string]string{EnvRole: "client"}, RoleClient, "file", "nats://file:4222"},
		{"auto", map[string]string{EnvRole: "auto"}, RoleAuto, "file", "nats://file:4222"},
		{"rollout", map[string]string{EnvRolloutID: "v2.0.1"}, RoleServe, "v2.0.1", "nats://file:4222"},
		{"url", map[string]string{EnvNATSURL: "nats://env:4222"}, RoleServe, "file", "nats://env:4222"},
		{"empty values keep the file", map[string]string{EnvRole: "", EnvRolloutID: "", EnvNATSURL: ""}, RoleServe, "file", "nats://file:4222"},
		{"all", map[string]string{EnvRole: "auto", EnvRolloutID: "r9", EnvNATSURL: "tls://env:4443"}, RoleAuto, "r9", "tls://env:4443"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, file, envOf(tc.env))
			e := c.NATS.Engine
			if e.Role != tc.role || e.RolloutID != tc.roll || c.NATS.URL != tc.url {
				t.Fatalf("got role %s rollout %s url %s, want %s %s %s", e.Role, e.RolloutID, c.NATS.URL, tc.role, tc.roll, tc.url)
			}
		})
	}
	t.Run("listen addresses", func(t *testing.T) {
		c := mustParse(t, file+"http: {listen: \"127.0.0.1:9000\"}\n", envOf(map[string]string{EnvHTTPListen: "0.0.0.0:8080", EnvEmbeddedListen: "0.0.0.0:4222"}))
		if c.HTTP.Listen != "0.0.0.0:8080" || c.NATS.Embedded.Listen != "0.0.0.0:4222" {
			t.Fatalf("http.listen %q, nats.embedded.listen %q: want the environment's 0.0.0.0:8080 and 0.0.0.0:4222", c.HTTP.Listen, c.NATS.Embedded.Listen)
		}
		c = mustParse(t, file+"http: {listen: \"127.0.0.1:9000\"}\n", envOf(map[string]string{EnvHTTPListen: ""}))
		if c.HTTP.Listen != "127.0.0.1:9000" {
			t.Fatalf("an empty ABI_HTTP_LISTEN gave http.listen %q, want the file's", c.HTTP.Listen)
		}
	})
	t.Run("environment fixes a bad file value", func(t *testing.T) {
		c := mustParse(t, "nats: {engine: {role: owner}}\n", envOf(map[string]string{EnvRole: "client"}))
		if c.NATS.Engine.Role != RoleClient {
			t.Fatalf("role %s", c.NATS.Engine.Role)
		}
	})
}

func TestBadEnvironmentNamesTheVariable(t *testing.T) {
	cases := []struct {
		name, variable, value, key, rule string
	}{
		{"role", EnvRole, "standby", "nats.engine.role", "serve, client or auto"},
		{"rollout with a space", EnvRolloutID, "not valid", "nats.engine.rollout_id", "must match"},
		{"rollout with a leading dot", EnvRolloutID, ".v2", "nats.engine.rollout_id", "must match"},
		{"url", EnvNATSURL, "http://x:4222", "nats.url", "nats://, tls://"},
		{"http listen", EnvHTTPListen, "0.0.0.0", "http.listen", "host:port"},
		{"embedded listen", EnvEmbeddedListen, "0.0.0.0:99999", "nats.embedded.listen", "host:port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(nil, envOf(map[string]string{tc.variable: tc.value}))
			is := oneIssue(t, tc.variable+"="+tc.value, err)
			if is.Key != tc.key || is.Origin != "environment variable "+tc.variable || is.Line != 0 || !strings.Contains(is.Rule, tc.rule) {
				t.Fatalf("issue %+v, want %s from %s with %q", is, tc.key, tc.variable, tc.rule)
			}
			msg := err.Error()
			for _, part := range []string{tc.variable, tc.key, tc.value, tc.rule} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not name %q", msg, part)
				}
			}
		})
	}
}

func TestFlags(t *testing.T) {
	env := envOf(map[string]string{EnvRole: "client", EnvNATSURL: "nats://env:4222"})
	file := "nats: {url: nats://file:4222, engine: {role: auto}}\nhttp: {listen: \"127.0.0.1:9000\"}\n"

	t.Run("flags win over the environment and the file", func(t *testing.T) {
		c := mustParse(t, file, env, RoleFlag("serve"), NATSURLFlag("nats://flag:4222"), HTTPListenFlag(":9100"))
		if c.NATS.Engine.Role != RoleServe || c.NATS.URL != "nats://flag:4222" || c.HTTP.Listen != ":9100" {
			t.Fatalf("got %s %s %s", c.NATS.Engine.Role, c.NATS.URL, c.HTTP.Listen)
		}
	})
	t.Run("empty flags apply", func(t *testing.T) {
		c := mustParse(t, file, env, NATSURLFlag(""), HTTPListenFlag(""))
		if !c.NATS.EmbeddedBroker() || c.HTTP.Listen != "" {
			t.Fatalf("--nats \"\" --http \"\" gave url %q listen %q", c.NATS.URL, c.HTTP.Listen)
		}
	})
	t.Run("without flags the environment wins", func(t *testing.T) {
		c := mustParse(t, file, env)
		if c.NATS.Engine.Role != RoleClient || c.NATS.URL != "nats://env:4222" || c.HTTP.Listen != "127.0.0.1:9000" {
			t.Fatalf("got %s %s %s", c.NATS.Engine.Role, c.NATS.URL, c.HTTP.Listen)
		}
	})
	for _, tc := range []struct {
		o         Override
		flag, key string
	}{
		{RoleFlag("leader"), "--role", "nats.engine.role"},
		{NATSURLFlag("http://localhost:4222"), "--nats", "nats.url"},
		{HTTPListenFlag("8080"), "--http", "http.listen"},
	} {
		t.Run("bad "+tc.flag, func(t *testing.T) {
			_, err := Parse(nil, env, tc.o)
			is := oneIssue(t, tc.flag, err)
			if is.Key != tc.key || is.Origin != "flag "+tc.flag {
				t.Fatalf("issue %+v, want %s from flag %s", is, tc.key, tc.flag)
			}
			if !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("message %q does not name the flag", err)
			}
		})
	}
}

func TestApply(t *testing.T) {
	c := mustParse(t, "nats: {url: nats://file:4222}\n", envOf(map[string]string{EnvRole: "client"}))
	before := *c
	err := c.Apply(RoleFlag("serve"), HTTPListenFlag("nope"))
	is := oneIssue(t, "Apply", err)
	if is.Key != "http.listen" || is.Origin != "flag --http" {
		t.Fatalf("issue %+v", is)
	}
	if c.NATS.Engine.Role != RoleClient || c.HTTP.Listen != before.HTTP.Listen || c.origins[keyRole] != before.origins[keyRole] {
		t.Fatalf("a refused Apply changed the configuration: %+v", c)
	}
	if err := c.Apply(RoleFlag("serve"), HTTPListenFlag("")); err != nil {
		t.Fatal(err)
	}
	if c.NATS.Engine.Role != RoleServe || c.HTTP.Listen != "" || c.origins[keyRole].what != "flag --role" {
		t.Fatalf("Apply did not apply: %+v", c)
	}
	// The copy taken before shares nothing with the changed configuration.
	if before.origins[keyRole].what != "environment variable ABI_ENGINE_ROLE" {
		t.Fatalf("Apply changed a copy's origins: %+v", before.origins)
	}
	// Apply runs the shared-backend check too.
	c = mustParse(t, "services:\n  keyvalue: {adapter: bbolt}\n", envOf(map[string]string{EnvRolloutID: "v2"}), RoleFlag("auto"))
	var local *LocalBackendsError
	if err := c.Apply(RoleFlag("serve")); !errors.As(err, &local) {
		t.Fatalf("serve with a rollout on bbolt: %v, want a *LocalBackendsError", err)
	}
}

func TestLoadFiles(t *testing.T) {
	// Not parallel: these tests change the working directory.
	t.Run("explicit path missing", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope.yaml")
		_, err := Load(missing, nil)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--config") {
			t.Fatalf("got %v, want a not-exist error naming %s and --config", err, missing)
		}
	})
	t.Run("no file in the working directory gives the defaults", func(t *testing.T) {
		t.Chdir(t.TempDir())
		c, err := Load("", envOf(map[string]string{EnvRole: "client"}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Path() != "" || c.NATS.Engine.LeaseSeconds != 20 || c.NATS.Engine.Role != RoleClient {
			t.Fatalf("got path %q %+v", c.Path(), c.NATS.Engine)
		}
	})
	t.Run("abi-engine.yaml in the working directory", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, FileName), "log: {level: debug}\n")
		t.Chdir(dir)
		c, err := Load("", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Path() != FileName || c.Log.Level != "debug" {
			t.Fatalf("got path %q level %s", c.Path(), c.Log.Level)
		}
	})
	t.Run("errors name the discovered file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, FileName), "log: {level: loud}\n")
		t.Chdir(dir)
		_, err := Load("", nil)
		var cerr *Error
		if !errors.As(err, &cerr) || cerr.Path != FileName || !strings.Contains(err.Error(), "in "+FileName+": log.level") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("explicit path wins over the working directory", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, FileName), "log: {level: debug}\n")
		other := filepath.Join(dir, "other.yaml")
		write(t, other, "log: {level: warn}\n")
		t.Chdir(dir)
		c, err := Load(other, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Path() != other || c.Log.Level != "warn" {
			t.Fatalf("got path %q level %s", c.Path(), c.Log.Level)
		}
	})
	t.Run("empty file gives the defaults", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "empty.yaml")
		write(t, empty, "")
		c, err := Load(empty, nil)
		if err != nil || c.Path() != empty || c.Log.Level != "info" {
			t.Fatalf("got %v, %+v", err, c)
		}
	})
	t.Run("an unreadable abi-engine.yaml is an error, not the defaults", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, FileName), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Chdir(dir)
		if _, err := Load("", nil); err == nil || !strings.Contains(err.Error(), FileName) {
			t.Fatalf("a directory named %s: got %v, want an error naming it", FileName, err)
		}
	})
	t.Run("flags through Load", func(t *testing.T) {
		t.Chdir(t.TempDir())
		c, err := Load("", envOf(map[string]string{EnvRole: "client"}), RoleFlag("auto"))
		if err != nil || c.NATS.Engine.Role != RoleAuto {
			t.Fatalf("got %v, %+v", err, c)
		}
	})
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNATSURLWithoutAScheme: host:port, as nats.go and the NATS tools read it, is
// nats://host:port, in every element of a list, from a flag, the environment or a file.
func TestNATSURLWithoutAScheme(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:4222":                  "nats://127.0.0.1:4222",
		"a:4222, tls://b:4443,c":          "nats://a:4222, tls://b:4443,nats://c",
		"nats://a:4222":                   "nats://a:4222",
		"user:pass@nats.example.com:4222": "nats://user:pass@nats.example.com:4222",
	} {
		c, err := Parse(nil, nil, NATSURLFlag(in))
		if err != nil {
			t.Fatalf("--nats %s: %v", in, err)
		}
		if c.NATS.URL != want {
			t.Errorf("--nats %s: nats.url %q, want %q", in, c.NATS.URL, want)
		}
	}
}
