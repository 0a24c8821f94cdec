package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testpki"
	"github.com/abi-engine/engine/internal/testwait"
)

// runBinaryEnv runs the built binary in a directory of its own with PATH, HOME (that
// directory) and env, and nothing else of the test's environment.
func runBinaryEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatalf("abi-engine %s: %v", strings.Join(args, " "), err)
	}
	return 0, out.String(), errOut.String()
}

// natsContextDir writes the natscli context name (its JSON fields) under a
// configuration directory of its own, and returns XDG_CONFIG_HOME=<it>.
func natsContextDir(t *testing.T, name string, fields map[string]any) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, name+".json", string(data))
	return "XDG_CONFIG_HOME=" + root
}

// commandsReach runs status, call (set, then get), doctor and step-down with the
// connection args and env against the broker an engine serves on, and checks each
// reached it: what each prints is what only a connected command can know.
func commandsReach(t *testing.T, how string, holder string, env []string, conn ...string) {
	t.Helper()
	run := func(args ...string) (int, string, string) {
		return runBinaryEnv(t, env, append(args, conn...)...)
	}
	if code, out, errOut := run("status"); code != exitOK || !strings.Contains(out, "held by "+holder) {
		t.Errorf("%s: status: exit %d, want 0 naming %s\n%s%s", how, code, holder, out, errOut)
	}
	if code, out, errOut := run("call", "keyvalue", "set", `{"key":"k","value":"aGk="}`); code != exitOK {
		t.Errorf("%s: call keyvalue set: exit %d, want 0\n%s%s", how, code, out, errOut)
	}
	if code, out, errOut := run("call", "keyvalue", "get", `{"key":"k"}`); code != exitOK || !strings.Contains(out, "aGk=") {
		t.Errorf("%s: call keyvalue get: exit %d, want 0 and the value set\n%s%s", how, code, out, errOut)
	}
	code, out, errOut := run("doctor", "--json")
	var rep doctorJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code == exitUsage {
		t.Errorf("%s: doctor --json: exit %d (%v)\n%s%s", how, code, err, out, errOut)
	} else if len(rep.Findings) == 0 || rep.Findings[0].Check != "jetstream" || rep.Findings[0].Verdict != "OK" {
		t.Errorf("%s: doctor --json did not reach JetStream: %+v", how, rep.Findings)
	}
	// No standby: the holder answers that none qualifies, which only it can say.
	if code, out, errOut := run("step-down", "--timeout", "30s"); code != exitServing || !strings.Contains(errOut, holder+" on ") || !strings.Contains(errOut, "keeps serving: NO_STANDBY") {
		t.Errorf("%s: step-down: exit %d, want 3 from the holder\n%s%s", how, code, out, errOut)
	}
}

// evictReaches evicts the holder with the connection args.
func evictReaches(t *testing.T, eng *engineProcess, holder string, env []string, conn ...string) {
	t.Helper()
	code, out, errOut := runBinaryEnv(t, env, append([]string{"evict", "--force", "--instance", holder}, conn...)...)
	if code != exitOK || !strings.Contains(out, "evicted") {
		t.Fatalf("evict --force: exit %d, want 0\n%s%s", code, out, errOut)
	}
	// With no standby to take the lease, the evicted engine takes it again: its log
	// shows that it was evicted.
	testwait.For(t, time.Minute, "the engine logs its eviction", func() bool {
		return strings.Contains(eng.stderr.String(), `"event":"evicted"`)
	})
}

// TestProcessCommandsLogInWithUserAndPassword: against a broker that requires a user
// and password, every command reaches it with --user and --password (or
// --password-file), and with a natscli context (--context, NATS_CONTEXT, the selected
// one); a flag wins over the context; a wrong password fails at once, naming the user
// and where the login came from.
func TestProcessCommandsLogInWithUserAndPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "abi", Password: "s3cret"}}
	})
	dir := t.TempDir()
	pwFile := writeFile(t, dir, "pw", "s3cret\n")
	eng := startEngine(t, fmt.Sprintf("nats: {url: %q, user: abi, password_file: %q, engine: {lease_seconds: 2, drain_seconds: 1}}\n", srv.URL(), pwFile))
	eng.waitReady(t)
	holder := eng.status(t).InstanceID

	commandsReach(t, "flags", holder, nil, "--nats", srv.URL(), "--user", "abi", "--password", "s3cret")
	ctxEnv := natsContextDir(t, "prod", map[string]any{"url": srv.URL(), "user": "abi", "password": "s3cret"})
	commandsReach(t, "--context", holder, []string{ctxEnv}, "--context", "prod")

	for _, tc := range []struct {
		how  string
		env  []string
		args []string
	}{
		{"--password-file", nil, []string{"--nats", srv.URL(), "--user", "abi", "--password-file", pwFile}},
		{"NATS_CONTEXT", []string{ctxEnv, "NATS_CONTEXT=prod"}, nil},
		{"a flag over the context", []string{natsContextDir(t, "stale", map[string]any{"url": srv.URL(), "user": "abi", "password": "old"})},
			[]string{"--context", "stale", "--password", "s3cret", "--user", "abi"}},
	} {
		if code, out, errOut := runBinaryEnv(t, tc.env, append([]string{"status"}, tc.args...)...); code != exitOK || !strings.Contains(out, "held by "+holder) {
			t.Errorf("%s: status: exit %d, want 0\n%s%s", tc.how, code, out, errOut)
		}
	}
	selected := natsContextDir(t, "picked", map[string]any{"url": srv.URL(), "user": "abi", "password": "s3cret"})
	writeFile(t, filepath.Join(strings.TrimPrefix(selected, "XDG_CONFIG_HOME="), "nats"), "context.txt", "picked\n")
	if code, out, errOut := runBinaryEnv(t, []string{selected}, "status"); code != exitOK || !strings.Contains(out, "held by "+holder) {
		t.Errorf("the selected context: status: exit %d, want 0\n%s%s", code, out, errOut)
	}

	// A wrong password: refused at the first attempt, naming the login and where it
	// came from, not a timeout.
	for _, tc := range []struct {
		how, from string
		env       []string
		args      []string
	}{
		{"flags", `user "abi" (from flags)`, nil, []string{"--nats", srv.URL(), "--user", "abi", "--password", "wrong"}},
		{"context", `user "abi" (from natscli context "stale")`, []string{natsContextDir(t, "stale", map[string]any{"url": srv.URL(), "user": "abi", "password": "wrong"})}, []string{"--context", "stale"}},
	} {
		code, out, errOut := runBinaryEnv(t, tc.env, append([]string{"status"}, tc.args...)...)
		if code != exitRuntime || !strings.Contains(errOut, "Authorization Violation") || !strings.Contains(errOut, "the broker refused the login, "+tc.from) ||
			strings.Contains(errOut, "deadline") || strings.Contains(errOut, "wrong") {
			t.Errorf("a wrong password (%s): exit %d, want 1 naming the login, without the password\n%s%s", tc.how, code, out, errOut)
		}
	}
	evictReaches(t, eng, holder, []string{ctxEnv}, "--context", "prod")
}

// TestProcessCommandsLogInWithAnNkey: against a broker that takes only an nkey, the
// commands reach it with --nkey and with a natscli context's nkey.
func TestProcessCommandsLogInWithAnNkey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	srv := natstest.Start(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	seedFile := writeFile(t, t.TempDir(), "user.nk", string(seed)+"\n")
	eng := startEngine(t, fmt.Sprintf("nats: {url: %q, nkey_seed_file: %q, engine: {lease_seconds: 2, drain_seconds: 1}}\n", srv.URL(), seedFile))
	eng.waitReady(t)
	holder := eng.status(t).InstanceID

	commandsReach(t, "flags", holder, nil, "--nats", srv.URL(), "--nkey", seedFile)
	ctxEnv := natsContextDir(t, "nk", map[string]any{"url": srv.URL(), "nkey": seedFile})
	commandsReach(t, "--context", holder, []string{ctxEnv}, "--context", "nk")

	// Without the nkey the broker refuses, and says which login it refused.
	if code, out, errOut := runBinaryEnv(t, nil, "status", "--nats", srv.URL()); code != exitRuntime || !strings.Contains(errOut, "the broker refused the login, no login") {
		t.Errorf("no login: exit %d, want 1 naming the login\n%s%s", code, out, errOut)
	}
	evictReaches(t, eng, holder, nil, "--nats", srv.URL(), "--nkey", seedFile)
}

// TestProcessCommandsConnectWithMTLS: against a broker that verifies client
// certificates against a private CA, the commands reach it with --tls-ca, --tls-cert
// and --tls-key, and with a natscli context's ca, cert and key.
func TestProcessCommandsConnectWithMTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	srvPair, err := ca.Server("broker")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("operator")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvPair.CertFile, KeyFile: srvPair.KeyFile, CaFile: ca.CertFile, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, func(o *server.Options) { o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true })
	url := "tls://" + srv.Addr()
	eng := startEngine(t, fmt.Sprintf("nats: {url: %q, tls: {ca_file: %q, cert_file: %q, key_file: %q}, engine: {lease_seconds: 2, drain_seconds: 1}}\n",
		url, ca.CertFile, client.CertFile, client.KeyFile))
	eng.waitReady(t)
	holder := eng.status(t).InstanceID

	commandsReach(t, "flags", holder, nil, "--nats", url, "--tls-ca", ca.CertFile, "--tls-cert", client.CertFile, "--tls-key", client.KeyFile)
	ctxEnv := natsContextDir(t, "tls", map[string]any{"url": url, "ca": ca.CertFile, "cert": client.CertFile, "key": client.KeyFile})
	commandsReach(t, "--context", holder, []string{ctxEnv}, "--context", "tls")

	// A certificate file that is not there is named as the flag that gave it.
	missing := filepath.Join(dir, "gone.pem")
	if code, out, errOut := runBinaryEnv(t, nil, "status", "--nats", url, "--tls-ca", ca.CertFile, "--tls-cert", missing, "--tls-key", client.KeyFile); code != exitUsage ||
		!strings.Contains(errOut, "--tls-cert "+missing) {
		t.Errorf("a missing --tls-cert: exit %d, want 2 naming the flag\n%s%s", code, out, errOut)
	}
	evictReaches(t, eng, holder, []string{ctxEnv}, "--context", "tls")
}

// TestProcessStatusWithoutPermissionFailsAtOnce: status (and status --watch) run by a
// user who may not read the lease fail at once naming the subject the broker refused,
// instead of waiting out the client timeout and ending "context deadline exceeded".
func TestProcessStatusWithoutPermissionFailsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, limited := limitedBroker(t)
	for _, tc := range []struct {
		args    []string
		subject string
	}{
		{[]string{"status"}, `publish to "$JS.API.STREAM.INFO.KV_ABI_ENGINE"`},
		// The watch subscribes first to the bucket's creation, for an account where
		// none exists yet.
		{[]string{"status", "--watch"}, `subscription to "$JS.EVENT.ADVISORY.STREAM.CREATED.KV_ABI_ENGINE"`},
	} {
		args := tc.args
		code, out, errOut := runBinaryEnv(t, nil, append(args, "--nats", limited)...)
		if code != exitRuntime || !strings.Contains(errOut, "the broker refused this user's "+tc.subject) ||
			!strings.Contains(errOut, "status only reads, nothing was changed") || strings.Contains(errOut, "deadline exceeded") {
			t.Errorf("%s by a user who may not read the lease: exit %d, want 1 naming the subject\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// credsBroker starts a broker in operator mode whose one account has JetStream, and
// returns its URL and a .creds file of a user of that account.
func credsBroker(t *testing.T) (url, creds string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	op, err := nkeys.CreateOperator()
	must(err)
	opPub, _ := op.PublicKey()
	opClaims := jwt.NewOperatorClaims(opPub)
	opJWT, err := opClaims.Encode(op)
	must(err)
	opClaims, err = jwt.DecodeOperatorClaims(opJWT)
	must(err)
	resolver := &server.MemAccResolver{}
	account := func(js bool) (nkeys.KeyPair, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		accJWT, err := ac.Encode(op)
		must(err)
		must(resolver.Store(pub, accJWT))
		return kp, pub
	}
	_, sysPub := account(false)
	acc, accPub := account(true)
	user, err := nkeys.CreateUser()
	must(err)
	userPub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(userPub)
	uc.IssuerAccount = accPub
	userJWT, err := uc.Encode(acc)
	must(err)
	seed, _ := user.Seed()
	file, err := jwt.FormatUserConfig(userJWT, seed)
	must(err)
	srv := natstest.Start(t, func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	})
	return srv.URL(), writeFile(t, t.TempDir(), "ops.creds", string(file))
}

// TestProcessCommandsLogInWithCreds: against a broker in operator mode (JWT users),
// the commands reach it with --creds and with a natscli context's creds.
func TestProcessCommandsLogInWithCreds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	url, creds := credsBroker(t)
	eng := startEngine(t, fmt.Sprintf("nats: {url: %q, credentials: %q, engine: {lease_seconds: 2, drain_seconds: 1}}\n", url, creds))
	eng.waitReady(t)
	holder := eng.status(t).InstanceID

	commandsReach(t, "flags", holder, nil, "--nats", url, "--creds", creds)
	ctxEnv := natsContextDir(t, "jwt", map[string]any{"url": url, "creds": creds})
	commandsReach(t, "--context", holder, []string{ctxEnv}, "--context", "jwt")
	evictReaches(t, eng, holder, nil, "--nats", url, "--creds", creds)
}
