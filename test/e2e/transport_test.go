package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testpki"
	"github.com/abi-engine/engine/internal/testproc"
)

// secretFile writes content to name in dir, readable by its owner only, as a mounted
// Kubernetes Secret would be.
func secretFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveWith runs an engine whose nats block holds url and natsKeys in dir, waits until
// it serves, and checks `abi-engine status` reaches the broker with the same login.
func serveWith(t *testing.T, dir, url, natsKeys string) {
	t.Helper()
	port := testproc.FreePort(t)
	writeConfig(t, dir, fmt.Sprintf(`nats:
  url: %q
  connect_timeout_seconds: 5
%s  engine: {lease_seconds: 2, drain_seconds: 1}
http: {listen: "127.0.0.1:%d"}
`, url, natsKeys, port))
	p := startArgs(t, "engine", dir, port, nil, "run")
	p.waitState("serving", 20*time.Second)
	code, out := runCommand(t, dir, nil, "status")
	if code != 0 || !strings.Contains(out, p.instanceID()) {
		t.Fatalf("status with the same login: exit %d\n%s", code, out)
	}
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(20 * time.Second); code != 0 {
		t.Fatalf("engine exit %d", code)
	}
}

// TestEnginesConnectWithMTLSNkeyAndTokenFile is issue 15's transport security: an
// engine (and the CLI) connects with mTLS to a broker that verifies clients against a
// private CA made here, with an nkey, and with a token file.
func TestEnginesConnectWithMTLSNkeyAndTokenFile(t *testing.T) {
	t.Run("mTLS", func(t *testing.T) {
		dir := t.TempDir()
		ca, err := testpki.NewCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		srvPair, err := ca.Server("broker")
		if err != nil {
			t.Fatal(err)
		}
		client, err := ca.Client("engine")
		if err != nil {
			t.Fatal(err)
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvPair.CertFile, KeyFile: srvPair.KeyFile, CaFile: ca.CertFile, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		srv := natstest.Start(t, func(o *server.Options) { o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true })
		url := "tls://" + srv.Addr()
		serveWith(t, dir, url, fmt.Sprintf("  tls: {ca_file: %q, cert_file: %q, key_file: %q}\n", ca.CertFile, client.CertFile, client.KeyFile))

		// Without the client certificate the broker refuses the engine, at the first
		// attempt (a bound of a minute, that only a retry would reach), naming the
		// certificate.
		other := t.TempDir()
		writeConfig(t, other, fmt.Sprintf("nats:\n  url: %q\n  connect_timeout_seconds: 60\n  tls: {ca_file: %q}\nhttp: {listen: \"\"}\n", url, ca.CertFile))
		code, out := runCommand(t, other, nil, "run")
		if code != 1 || !strings.Contains(out, "client certificate") || strings.Contains(out, "retrying") || strings.Contains(out, "gave up after") {
			t.Fatalf("an engine without a client certificate: exit %d, want 1 at the first attempt naming the certificate\n%s", code, out)
		}
	})
	t.Run("nkey", func(t *testing.T) {
		dir := t.TempDir()
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		srv := natstest.Start(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
		serveWith(t, dir, srv.URL(), fmt.Sprintf("  nkey_seed_file: %q\n", secretFile(t, dir, "engine.nk", string(seed)+"\n")))
	})
	t.Run("token file", func(t *testing.T) {
		dir := t.TempDir()
		const token = "t0ken-from-a-file"
		srv := natstest.Start(t, func(o *server.Options) { o.Authorization = token })
		serveWith(t, dir, srv.URL(), fmt.Sprintf("  token_file: %q\n", secretFile(t, dir, "token", token+"\n")))
	})
	t.Run("user and password file", func(t *testing.T) {
		dir := t.TempDir()
		srv := natstest.Start(t, withUser("abi", "pa55-from-a-file"))
		serveWith(t, dir, srv.URL(), fmt.Sprintf("  user: abi\n  password_file: %q\n", secretFile(t, dir, "pw", "pa55-from-a-file\n")))
	})
}

// TestConfigCheckNamesAMissingCertificate: config check fails (exit 2) naming the key
// of a certificate file that is not there, before anything connects.
func TestConfigCheckNamesAMissingCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("engine")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "gone.pem")
	path := writeConfig(t, dir, fmt.Sprintf("nats:\n  url: tls://127.0.0.1:4222\n  tls: {ca_file: %q, cert_file: %q, key_file: %q}\n", ca.CertFile, missing, client.KeyFile))
	code, out := runCommand(t, dir, nil, "config", "check", "--config", path)
	if code != 2 || !strings.Contains(out, "nats.tls.cert_file") || !strings.Contains(out, "gone.pem") {
		t.Fatalf("config check: exit %d, want 2 naming nats.tls.cert_file and the file\n%s", code, out)
	}
}

// TestEmbeddedBrokerTakesTheEnginesLogin: with nats.url empty and a token file, the
// embedded broker requires that token: the engine serves through it, the CLI with the
// same configuration reaches it, and a connection without the token is refused.
func TestEmbeddedBrokerTakesTheEnginesLogin(t *testing.T) {
	dir := t.TempDir()
	port := testproc.FreePort(t)
	tok := secretFile(t, dir, "token", "dev-t0ken\n")
	p := start(t, "engine", engineConfig{HTTPPort: testproc.FreePort(t), WorkingDir: dir, KeyValue: "memory", Objects: "memory",
		NATSYAML: fmt.Sprintf("  embedded: {listen: \"127.0.0.1:%d\", store_dir: %q}\n  token_file: %q\n", port, filepath.Join(dir, "nats"), tok)})
	p.waitState("serving", 20*time.Second)
	if code, out := runCommand(t, dir, nil, "status"); code != 0 || !strings.Contains(out, p.instanceID()) {
		t.Fatalf("status with the same configuration: exit %d\n%s", code, out)
	}
	if nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("the embedded broker took a connection without the token")
	}
}
