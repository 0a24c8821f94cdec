package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	long := strings.Repeat("a", 128)
	type value struct {
		yaml string // as written in the file
		want string // Issue.Value, "" for a good value
	}
	cases := []struct {
		key    string
		rule   string // a part of the rule the message must carry
		values []value
	}{
		{"nats.engine.role", "serve, client or auto", []value{
			{"serve", ""}, {"client", ""}, {"auto", ""},
			{"owner", `"owner"`}, {"standby", `"standby"`}, {`""`, `""`}, {"Serve", `"Serve"`},
		}},
		{"nats.engine.rollout_id", "^([A-Za-z0-9_][A-Za-z0-9_.:-]{0,127})?$", []value{
			{`""`, ""}, {"v2", ""}, {"v2.0.1", ""}, {"_a:b-c.d", ""}, {long, ""},
			{`"has space"`, `"has space"`}, {".leading", `".leading"`}, {`"-x"`, `"-x"`},
			{long + "a", strconv.Quote(long + "a")}, {`"v2/3"`, `"v2/3"`},
		}},
		{"nats.engine.lease_seconds", "from 1 to 300", []value{
			{"1", ""}, {"300", ""}, {"2.5", ""},
			{"0.5", "0.5"}, {"0", "0"}, {"300.5", "300.5"}, {"-20", "-20"}, {".inf", "+Inf"}, {".nan", "NaN"},
		}},
		{"nats.engine.standby_timeout_seconds", "greater than 0", []value{
			{"0.1", ""}, {"900", ""}, {"0", "0"}, {"-1", "-1"}, {".inf", "+Inf"}, {".nan", "NaN"},
		}},
		{"nats.engine.drain_seconds", "0 or more", []value{
			{"0", ""}, {"60", ""}, {"0.25", ""}, {"-1", "-1"}, {".inf", "+Inf"}, {"-.inf", "-Inf"},
		}},
		{"nats.engine.lease_replicas", "from 1 to 5", []value{
			{"1", ""}, {"3", ""}, {"5", ""}, {"0", "0"}, {"6", "6"}, {"-1", "-1"},
		}},
		{"nats.engine.standby", "off or hot", []value{
			{"off", ""}, {"hot", ""}, {"warm", `"warm"`}, {"Hot", `"Hot"`}, {`""`, `""`},
		}},
		{"nats.max_concurrent_requests", "from 1 to 4096", []value{
			{"1", ""}, {"64", ""}, {"4096", ""}, {"0", "0"}, {"4097", "4097"},
		}},
		{"nats.client_timeout_seconds", "greater than 0", []value{
			{"0.5", ""}, {"10", ""}, {"0", "0"}, {"-1", "-1"}, {".nan", "NaN"}, {".inf", "+Inf"},
		}},
		{"nats.connect_timeout_seconds", "greater than 0", []value{
			{"0.5", ""}, {"5", ""}, {"0", "0"}, {"-1", "-1"}, {".nan", "NaN"}, {".inf", "+Inf"},
		}},
		{"services.keyvalue.adapter", "memory, bbolt, jetstream or postgres", []value{
			{"memory", ""}, {"bbolt", ""}, {"jetstream", ""},
			{"redis", `"redis"`}, {`""`, `""`}, {"JetStream", `"JetStream"`},
		}},
		{"services.object_storage.adapter", "memory, fs or jetstream", []value{
			{"memory", ""}, {"fs", ""}, {"jetstream", ""}, {"s3", `"s3"`}, {`""`, `""`},
		}},
		{"services.keyvalue.bucket", "JetStream bucket name", []value{
			{"ABI_KV", ""}, {"my-kv_2", ""}, {`"bad name"`, `"bad name"`}, {`""`, `""`}, {"a.b", `"a.b"`},
		}},
		{"services.object_storage.bucket", "JetStream bucket name", []value{
			{"ABI_OBJECTS", ""}, {"objs", ""}, {`"a*"`, `"a*"`}, {`""`, `""`},
		}},
		{"log.level", "debug, info, warn or error", []value{
			{"debug", ""}, {"info", ""}, {"warn", ""}, {"error", ""}, {"verbose", `"verbose"`}, {"warning", `"warning"`},
		}},
		{"log.format", "json, console or auto", []value{
			{"json", ""}, {"console", ""}, {"auto", ""}, {"text", `"text"`},
		}},
		{"telemetry.otlp_endpoint", "OTLP/HTTP collector", []value{
			{`""`, ""}, {`"otel-collector:4318"`, ""}, {`"https://otel.example.com/v1/traces"`, ""},
			{`"otel-collector"`, `"otel-collector"`}, {`"http://"`, `"http://"`},
		}},
		{"telemetry.sample_ratio", "from 0 to 1", []value{
			{"0", ""}, {"0.25", ""}, {"1", ""}, {"1.5", "1.5"}, {"-0.1", "-0.1"},
		}},
		{"telemetry.service_name", "must not be empty", []value{
			{"billing-engine", ""}, {`""`, `""`},
		}},
		{"http.listen", "host:port with a port from 0 to 65535", []value{
			{`""`, ""}, {`"127.0.0.1:8080"`, ""}, {`":8080"`, ""}, {`"[::1]:0"`, ""}, {`"localhost:9090"`, ""},
			{`"8080"`, `"8080"`}, {`"localhost:99999"`, `"localhost:99999"`}, {`"a b:80"`, `"a b:80"`},
			{`"host:http"`, `"host:http"`}, {`"host:-1"`, `"host:-1"`},
		}},
		{"http.pprof", "needs http.listen", []value{{"false", ""}, {"true", ""}}},
		{"nats.embedded.listen", "host:port with a port from 0 to 65535", []value{
			{`"127.0.0.1:4222"`, ""}, {`"0.0.0.0:0"`, ""}, {`""`, `""`}, {`"4222"`, `"4222"`},
		}},
		{"nats.embedded.store_dir", "must not be empty", []value{
			{"data/nats", ""}, {"/var/lib/abi", ""}, {`""`, `""`}, {`"  "`, `"  "`},
		}},
		{"nats.url", "nats://, tls://, ws:// or wss://", []value{
			{`""`, ""}, {`"nats://a:4222"`, ""}, {`"nats://a"`, ""}, {`"tls://a:4443,ws://b:80, wss://c/ws"`, ""},
			{`"nats://user:pw@a:4222"`, ""}, {`"NATS://A:4222"`, ""},
			{`"http://a:4222"`, `"http://a:4222"`}, {`"a:4222"`, ""}, {`"127.0.0.1:4222,b"`, ""}, {`"a:70000"`, `"a:70000"`}, {`"nats://"`, `"nats://"`},
			{`"nats://a:4222,,nats://b"`, `"nats://a:4222,,nats://b"`}, {`"nats://a:0"`, `"nats://a:0"`},
			{`"nats://a:70000"`, `"nats://a:70000"`}, {`"nats://a:4222 nats://b:4222"`, `"nats://a:4222 nats://b:4222"`},
		}},
	}
	for _, tc := range cases {
		for _, v := range tc.values {
			t.Run(tc.key+"="+v.yaml, func(t *testing.T) {
				doc := nest(tc.key, v.yaml)
				line := len(strings.Split(tc.key, "."))
				// A broker of its own, so a rollout id is not also a shared-backend test.
				env := envOf(map[string]string{EnvNATSURL: "nats://127.0.0.1:4222"})
				if tc.key == "nats.url" {
					env = nil
				}
				c, err := Parse([]byte(doc), env)
				if v.want == "" {
					if err != nil {
						t.Fatalf("good value refused:\n%s\n%v", doc, err)
					}
					if c.origins[tc.key].line != line {
						t.Errorf("value recorded at line %d, want %d", c.origins[tc.key].line, line)
					}
					return
				}
				is := oneIssue(t, doc, err)
				if is.Key != tc.key || is.Value != v.want || !strings.Contains(is.Rule, tc.rule) || is.Line != line {
					t.Fatalf("issue %+v, want key %s value %s line %d and a rule with %q", is, tc.key, v.want, line, tc.rule)
				}
				msg := err.Error()
				for _, part := range []string{tc.key, v.want, tc.rule, "line " + strconv.Itoa(line)} {
					if !strings.Contains(msg, part) {
						t.Errorf("message %q does not name %q", msg, part)
					}
				}
			})
		}
	}
}

// oneIssue asserts err is an *Error with exactly one issue and returns it.
func oneIssue(t *testing.T, doc string, err error) Issue {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("%s\ngot %v (%T), want *Error", doc, err, err)
	}
	if len(cerr.Issues) != 1 {
		t.Fatalf("%s\ngot %d issues, want 1: %v", doc, len(cerr.Issues), err)
	}
	return cerr.Issues[0]
}

func TestAdapterOptions(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		key  string // "" when valid
		rule string
		line int // of the issue; 2 when 0 (the value's line), -1 when not tied to the file
	}{
		{"bbolt default path", "keyvalue: {adapter: bbolt}", "", "", 0},
		{"bbolt path", "keyvalue: {adapter: bbolt, path: /var/lib/abi/kv.db}", "", "", 0},
		{"bbolt empty path", `keyvalue: {adapter: bbolt, path: ""}`, "services.keyvalue.path", "must not be empty", 0},
		{"postgres", `keyvalue: {adapter: postgres, dsn: "postgres://abi@db/abi", table: kv}`, "", "", 0},
		{"postgres key=value dsn", `keyvalue: {adapter: postgres, dsn: "host=db dbname=abi", table: kv_1}`, "", "", 0},
		{"postgres schema-qualified table", `keyvalue: {adapter: postgres, dsn: "x", table: abi.kv}`, "services.keyvalue.table", "PostgreSQL table name", 0},
		{"postgres upper-case table", `keyvalue: {adapter: postgres, dsn: "x", table: KV}`, "services.keyvalue.table", "lowercase", 0},
		{"postgres without dsn", "keyvalue: {adapter: postgres}", "services.keyvalue.dsn", "required by the postgres adapter: the PostgreSQL connection string", -1},
		{"postgres bad table", `keyvalue: {adapter: postgres, dsn: "x", table: "1kv"}`, "services.keyvalue.table", "PostgreSQL table name", 0},
		{"postgres injected table", `keyvalue: {adapter: postgres, dsn: "x", table: "kv; drop table x"}`, "services.keyvalue.table", "PostgreSQL table name", 0},
		{"postgres too many parts", `keyvalue: {adapter: postgres, dsn: "x", table: "a.b.c"}`, "services.keyvalue.table", "PostgreSQL table name", 0},
		{"postgres table too long", `keyvalue: {adapter: postgres, dsn: "x", table: ` + strings.Repeat("t", 64) + `}`, "services.keyvalue.table", "at most 63 characters", 0},
		{"jetstream lease bucket", "keyvalue: {adapter: jetstream, bucket: ABI_ENGINE}", "services.keyvalue.bucket", "bucket of the engine lease", 0},
		{"fs root", "object_storage: {adapter: fs, root: /srv/objects}", "", "", 0},
		{"fs empty root", `object_storage: {adapter: fs, root: ""}`, "services.object_storage.root", "must not be empty", 0},
		// An option of another adapter is refused, so it never looks as if it took effect.
		{"path with jetstream", "keyvalue: {adapter: jetstream, path: kv.db}", "services.keyvalue.path", `only the bbolt adapter reads it, and services.keyvalue.adapter is "jetstream"`, 0},
		{"dsn with bbolt", `keyvalue: {adapter: bbolt, dsn: "postgres://x"}`, "services.keyvalue.dsn", "only the postgres adapter", 0},
		{"table with memory", "keyvalue: {adapter: memory, table: kv}", "services.keyvalue.table", "only the postgres adapter", 0},
		{"bucket with postgres", `keyvalue: {adapter: postgres, dsn: x, bucket: KV}`, "services.keyvalue.bucket", "only the jetstream adapter", 0},
		{"root with jetstream", "object_storage: {adapter: jetstream, root: /srv}", "services.object_storage.root", "only the fs adapter", 0},
		{"bucket with fs", "object_storage: {adapter: fs, bucket: OBJ}", "services.object_storage.bucket", "only the jetstream adapter", 0},
		// Replicas of a service's own bucket (issue 10 item 11).
		{"jetstream keyvalue replicas", "keyvalue: {adapter: jetstream, replicas: 3}", "", "", 0},
		{"jetstream objects replicas", "object_storage: {adapter: jetstream, replicas: 5}", "", "", 0},
		{"keyvalue replicas 0", "keyvalue: {adapter: jetstream, replicas: 0}", "services.keyvalue.replicas", "from 1 to 5 (leave it out to take nats.engine.lease_replicas)", 0},
		{"keyvalue replicas 6", "keyvalue: {adapter: jetstream, replicas: 6}", "services.keyvalue.replicas", "from 1 to 5", 0},
		{"objects replicas -1", "object_storage: {adapter: jetstream, replicas: -1}", "services.object_storage.replicas", "from 1 to 5", 0},
		{"replicas with postgres", `keyvalue: {adapter: postgres, dsn: x, replicas: 3}`, "services.keyvalue.replicas", `only the jetstream adapter reads it, and services.keyvalue.adapter is "postgres"`, 0},
		{"replicas with fs", "object_storage: {adapter: fs, replicas: 3}", "services.object_storage.replicas", "only the jetstream adapter", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := "services:\n  " + tc.yaml + "\n"
			_, err := Parse([]byte(doc), nil)
			if tc.key == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			line := tc.line
			switch line {
			case 0:
				line = 2
			case -1:
				line = 0
			}
			is := oneIssue(t, doc, err)
			if is.Key != tc.key || !strings.Contains(is.Rule, tc.rule) || is.Line != line {
				t.Fatalf("issue %+v, want key %s at line %d with %q", is, tc.key, line, tc.rule)
			}
		})
	}
}

// TestServiceReplicasDefaultToTheLeases is issue 10 item 11: each jetstream-backed
// service has replicas of its own, the lease's when not set.
func TestServiceReplicasDefaultToTheLeases(t *testing.T) {
	c, err := Parse([]byte("nats: {engine: {lease_replicas: 3}}\nservices:\n  object_storage: {replicas: 1}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if kv, obj := c.KeyValueReplicas(), c.ObjectStorageReplicas(); kv != 3 || obj != 1 {
		t.Fatalf("replicas keyvalue %d object_storage %d, want 3 (the lease's) and 1", kv, obj)
	}
	is := oneIssue(t, "", (func() error {
		_, err := Parse([]byte("services:\n  keyvalue: {adapter: memory, replicas: 3}\n"), nil)
		return err
	})())
	if is.Value != "3" {
		t.Fatalf("the value is shown as %s, want 3", is.Value)
	}
}

// http.pprof serves on the HTTP server, so it needs one; it is off by default.
func TestPprofNeedsHTTP(t *testing.T) {
	if c := mustParse(t, "", nil); c.HTTP.Pprof {
		t.Error("pprof is on by default")
	}
	if c := mustParse(t, "http: {pprof: true}\n", nil); !c.HTTP.Pprof {
		t.Error("http.pprof: true read as false")
	}
	doc := "http: {listen: \"\", pprof: true}\n"
	_, err := Parse([]byte(doc), nil)
	is := oneIssue(t, doc, err)
	if is.Key != "http.pprof" || !strings.Contains(is.Rule, "needs http.listen") {
		t.Fatalf("issue %+v, want http.pprof needing http.listen", is)
	}
}

func TestTypeErrors(t *testing.T) {
	cases := []struct {
		yaml, key, value, rule string
		line                   int
	}{
		{nest("nats.engine.lease_seconds", "abc"), "nats.engine.lease_seconds", `"abc"`, "must be a number", 3},
		{nest("nats.engine.lease_seconds", `"20"`), "nats.engine.lease_seconds", `"20"`, "must be a number", 3},
		{nest("nats.engine.lease_replicas", "1.5"), "nats.engine.lease_replicas", `"1.5"`, "must be a whole number", 3},
		{nest("nats.max_concurrent_requests", "many"), "nats.max_concurrent_requests", `"many"`, "must be a whole number", 2},
		{nest("nats.engine.role", "[serve]"), "nats.engine.role", "", "must be a string, found a list", 3},
		{nest("nats.engine", "[1, 2]"), "nats.engine", "", "must be a mapping of role, rollout_id, lease_seconds", 2},
		{nest("http.pprof", "maybe"), "http.pprof", `"maybe"`, "must be true or false", 2},
		{nest("http", "8080"), "http", "", `must be a mapping of listen, pprof, found "8080"`, 1},
		{"just a string\n", "", "", "must be a mapping of nats, services, http, log", 1},
	}
	for _, tc := range cases {
		t.Run(tc.yaml, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), nil)
			is := oneIssue(t, tc.yaml, err)
			if is.Key != tc.key || is.Value != tc.value || !strings.Contains(is.Rule, tc.rule) || is.Line != tc.line {
				t.Fatalf("issue %+v, want key %q value %q line %d with %q", is, tc.key, tc.value, tc.line, tc.rule)
			}
		})
	}
	// An integral float is a whole number.
	if c := mustParse(t, nest("nats.max_concurrent_requests", "128.0"), nil); c.NATS.MaxConcurrentRequests != 128 {
		t.Fatalf("128.0 read as %d", c.NATS.MaxConcurrentRequests)
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	doc := `nats:
  url: http://nowhere
  engine:
    role: owner
    lease_seconds: 0
    leas_seconds: 3
    drain_seconds: -1
services:
  keyvalue: {adapter: redis}
log: {level: verbose, format: text}
extra: 1
`
	_, err := Parse([]byte(doc), envOf(map[string]string{EnvRolloutID: "not valid"}))
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v, want *Error", err)
	}
	want := []struct {
		key  string
		line int
	}{
		{"nats.url", 2},
		{"nats.engine.role", 4},
		{"nats.engine.lease_seconds", 5},
		{"nats.engine.leas_seconds", 6},
		{"nats.engine.drain_seconds", 7},
		{"services.keyvalue.adapter", 9},
		{"log.level", 10},
		{"log.format", 10},
		{"extra", 11},
		{"nats.engine.rollout_id", 0}, // from the environment: after the file's problems
	}
	if len(cerr.Issues) != len(want) {
		t.Fatalf("got %d issues, want %d:\n%v", len(cerr.Issues), len(want), err)
	}
	for i, w := range want {
		if is := cerr.Issues[i]; is.Key != w.key || is.Line != w.line {
			t.Errorf("issue %d = %s (line %d), want %s (line %d)", i, is.Key, is.Line, w.key, w.line)
		}
	}
	if msg := err.Error(); !strings.Contains(msg, "10 problems") || !strings.Contains(msg, "environment variable ABI_ROLLOUT_ID") {
		t.Errorf("message %q does not count the problems or name the variable", msg)
	}
}

func TestValidateCodeBuiltConfig(t *testing.T) {
	c := Default()
	c.NATS.Engine.LeaseSeconds = 0
	c.Log.Format = "xml"
	err := c.Validate()
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Issues) != 2 {
		t.Fatalf("got %v, want two issues", err)
	}
	if want := "nats.engine.lease_seconds = 0: must be a finite number of seconds from 1 to 300"; cerr.Issues[0].String() != want {
		t.Errorf("issue = %q, want %q", cerr.Issues[0].String(), want)
	}
	// An option set in code for another adapter is not the file's mistake: Default sets
	// every option.
	c = Default()
	c.Services.KeyValue.Path = "elsewhere.db"
	if err := c.Validate(); err != nil {
		t.Errorf("an option of another adapter set in code: %v", err)
	}
}
