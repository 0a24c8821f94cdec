package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzLoad feeds the decoder arbitrary documents and environment values. Whatever comes
// in, Parse must not panic, and it must either return a configuration that validates or
// an error that says what is wrong.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("testdata/abi-engine.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	seeds := []string{
		string(example),
		"",
		"nats:\n  engine:\n    role: auto\n    lease_seconds: 2.5\n",
		"nats: {url: \"nats://a:4222,tls://b\"}\nservices:\n  keyvalue: {adapter: postgres, dsn: x, table: s.t}\n",
		"services:\n  keyvalue: {adapter: bbolt}\n  object_storage: {adapter: fs, root: /x}\n",
		"a: &a {b: *a}\n",
		"nats:\n  engine: &e\n    <<: [{role: client}, {lease_seconds: 3}]\n    <<: *e\n",
		"nats: [1, {engine: 2}]\n",
		"? [a]\n: b\n",
		"nats:\n  engine:\n    lease_replicas: 1.5\n    lease_seconds: .nan\n",
		"---\n---\n",
		"log: {level: info}\nlog: {level: info}\n",
		"x: !!binary aGVsbG8=\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), "", "", "")
	}
	f.Add([]byte("nats: {engine: {rollout_id: v1}}\n"), "serve", "v2", "nats://a:4222")
	f.Add([]byte(""), "standby", " x", "http://x")
	f.Fuzz(func(t *testing.T, data []byte, role, rollout, url string) {
		env := envOf(map[string]string{EnvRole: role, EnvRolloutID: rollout, EnvNATSURL: url})
		c, err := Parse(data, env)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a configuration with its error %v", err)
			}
			var cerr *Error
			if !errors.As(err, &cerr) || len(cerr.Issues) == 0 {
				t.Fatalf("error %v (%T) is not an *Error with issues", err, err)
			}
			for _, is := range cerr.Issues {
				if is.Rule == "" {
					t.Fatalf("issue without a rule: %+v", is)
				}
			}
			if cerr.Error() == "" {
				t.Fatal("empty message")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a configuration that does not validate: %v", err)
		}
		if err := c.CheckSharedBackends(); err != nil {
			t.Fatalf("Parse accepted a configuration the shared-backend check refuses: %v", err)
		}
	})
}
