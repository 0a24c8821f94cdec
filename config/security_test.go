package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/abi-engine/engine/internal/testpki"
)

// checkFile writes yaml to a file in dir and runs Check on it.
func checkFile(t *testing.T, dir, yaml string) (*Config, error) {
	t.Helper()
	path := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return Check(path, nil)
}

// issueFor finds the issue about key, failing the test when there is none.
func issueFor(t *testing.T, err error, key string) Issue {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("got %v, want a configuration error about %s", err, key)
	}
	for _, is := range cerr.Issues {
		if is.Key == key {
			return is
		}
	}
	t.Fatalf("no issue about %s in %v", key, err)
	return Issue{}
}

func writeSecret(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every file of the transport-security keys is read and parsed by config check, and a
// problem names its key; valid files pass.
func TestCheckReadsTheSecurityFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("engine")
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	seedFile := writeSecret(t, filepath.Join(dir, "user.nk"), string(seed)+"\n")
	token := writeSecret(t, filepath.Join(dir, "token"), "s3cret-token\n")
	pw := writeSecret(t, filepath.Join(dir, "pw"), "s3cret-pw\n")
	empty := writeSecret(t, filepath.Join(dir, "empty"), "\n")
	notPEM := writeSecret(t, filepath.Join(dir, "not.pem"), "hello\n")
	missing := filepath.Join(dir, "missing.pem")

	base := "nats:\n  url: tls://127.0.0.1:4222\n"
	good := []string{
		base + "  tls: {ca_file: " + ca.CertFile + ", cert_file: " + client.CertFile + ", key_file: " + client.KeyFile + "}\n",
		base + "  nkey_seed_file: " + seedFile + "\n",
		base + "  token_file: " + token + "\n",
		base + "  user: abi\n  password_file: " + pw + "\n",
		base + "  jwt_secret_file: " + token + "\n",
	}
	for _, y := range good {
		if _, err := checkFile(t, dir, y); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
	cases := []struct{ yaml, key, says string }{
		{base + "  tls: {cert_file: " + missing + ", key_file: " + client.KeyFile + "}\n", "nats.tls.cert_file", "no such file"},
		{base + "  tls: {cert_file: " + client.CertFile + ", key_file: " + missing + "}\n", "nats.tls.key_file", "no such file"},
		{base + "  tls: {cert_file: " + client.CertFile + ", key_file: " + ca.CertFile + "}\n", "nats.tls.cert_file", "certificate and its key"},
		{base + "  tls: {ca_file: " + notPEM + "}\n", "nats.tls.ca_file", "no PEM certificate"},
		{base + "  tls: {ca_file: " + missing + "}\n", "nats.tls.ca_file", "no such file"},
		{base + "  nkey_seed_file: " + token + "\n", "nats.nkey_seed_file", "not an nkey seed"},
		{base + "  token_file: " + empty + "\n", "nats.token_file", "empty"},
		{base + "  user: abi\n  password_file: " + missing + "\n", "nats.password_file", "no such file"},
		{base + "  jwt_secret_file: " + empty + "\n", "nats.jwt_secret_file", "empty"},
		{base + "  jwt_secret_file: " + missing + "\n", "nats.jwt_secret_file", "no such file"},
	}
	for _, tc := range cases {
		_, err := checkFile(t, dir, tc.yaml)
		is := issueFor(t, err, tc.key)
		if !strings.Contains(is.String(), tc.says) {
			t.Errorf("%s: issue %q does not say %q", tc.key, is, tc.says)
		}
		for _, secret := range []string{"s3cret", string(seed)} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error prints a secret: %v", tc.key, err)
			}
		}
	}
}

// The login keys go together as the docs say, without reading any file.
func TestLoginKeysGoTogether(t *testing.T) {
	base := "nats:\n  url: nats://127.0.0.1:4222\n"
	cases := []struct{ yaml, key string }{
		{base + "  token_file: /t\n  nkey_seed_file: /s\n", "nats.token_file"},
		{base + "  user: abi\n", "nats.password_file"},
		{base + "  password_file: /p\n", "nats.user"},
		{base + "  tls: {cert_file: /c}\n", "nats.tls.key_file"},
		{base + "  tls: {key_file: /k}\n", "nats.tls.cert_file"},
		{"nats:\n  tls: {ca_file: /ca}\n", "nats.tls"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml), nil)
		issueFor(t, err, tc.key)
	}
}

func TestLimitsRules(t *testing.T) {
	cases := []struct{ yaml, key string }{
		{"limits: {memory_mib: 8}\n", "limits.memory_mib"},
		{"limits: {client_memory_mib: 300}\n", "limits.client_memory_mib"},
		{"limits: {session_memory_mib: 65}\n", "limits.session_memory_mib"},
		{"limits: {request_upload_mib: 0}\n", "limits.request_upload_mib"},
		{"limits: {request_upload_mib: 1048577}\n", "limits.request_upload_mib"},
		{"limits: {sessions: 0}\n", "limits.sessions"},
		{"limits: {client_sessions: 65}\n", "limits.client_sessions"},
		{"limits: {session_idle_seconds: 0}\n", "limits.session_idle_seconds"},
		{"limits: {session_max_seconds: 30}\n", "limits.session_max_seconds"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml), nil)
		issueFor(t, err, tc.key)
	}
	c := mustParse(t, "limits: {memory_mib: 512, client_memory_mib: 128, session_memory_mib: 100}\n", nil)
	if c.Limits.Bytes() != 512<<20 || c.Limits.ClientBytes() != 128<<20 || c.Limits.SessionBytes() != 100<<20 {
		t.Fatalf("limits %+v", c.Limits)
	}
	// A memory bound below the default upload limit cuts it, and is valid as it is.
	c = mustParse(t, "limits: {memory_mib: 96}\n", nil)
	if c.Limits.RequestUploadBytes() != 96<<20 {
		t.Fatalf("upload limit %d with memory_mib 96, want 96 MiB", c.Limits.RequestUploadBytes())
	}
	if got := Default().Limits.RuntimeMemoryLimit(); got != (256+RuntimeHeadroomMiB)<<20 {
		t.Fatalf("runtime memory limit %d", got)
	}
}
