package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// permissionBlocks reads the permission sets of docs/security.md: each fenced conf
// block after a <!-- permissions: NAME --> line.
func permissionBlocks(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)<!-- permissions: ([a-z-]+) -->\n```conf\n(.*?)```").FindAllSubmatch(doc, -1) {
		blocks[string(m[1])] = string(m[2])
	}
	for _, role := range []string{"engine", "client", "caller", "status", "operator"} {
		if blocks[role] == "" {
			t.Fatalf("docs/security.md has no permission block for %s", role)
		}
	}
	return blocks
}

// userPassword is every test user's password.
const userPassword = "pw-of-the-test"

// privilegedBroker starts a JetStream broker whose users each have exactly one of the
// permission sets of docs/security.md: user NAME has the set NAME. More users may be
// given in Go (extra).
func privilegedBroker(t *testing.T, blocks map[string]string, extra ...*server.User) *natstest.Server {
	t.Helper()
	var users []string
	for name, perms := range blocks {
		users = append(users, fmt.Sprintf("{user: %q, password: %q, permissions: {\n%s\n}}", name, userPassword, perms))
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("authorization: {\n users: [\n"+strings.Join(users, ",\n")+"\n]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parsed, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("the permission blocks of docs/security.md do not parse as nats-server configuration: %v", err)
	}
	return natstest.Start(t, func(o *server.Options) { o.Users = append(parsed.Users, extra...) })
}

// asUser is the nats block's login of an engine or the CLI as user name.
func asUser(t *testing.T, dir, name string) string {
	return fmt.Sprintf("  user: %s\n  password_file: %q\n", name, secretFile(t, dir, "password-"+name, userPassword+"\n"))
}

// noViolation fails when a process logged a permission violation.
func noViolation(t *testing.T, p *proc) {
	t.Helper()
	if out := p.out.String(); strings.Contains(out, "permission_violation") || strings.Contains(strings.ToLower(out), "permissions violation") {
		t.Errorf("%s hit a permission it was not granted:\n%s", p.name, out)
	}
}

// TestLeastPrivilege runs, under exactly the permission sets of docs/security.md, a
// serving engine, SDK calls (transfers both ways, a parked reply), `abi-engine status`,
// a client engine, a standby that takes over in a handover; none of them hits a
// permission it lacks, and a caller cannot touch the lease bucket.
func TestLeastPrivilege(t *testing.T) {
	blocks := permissionBlocks(t)
	srv := privilegedBroker(t, blocks)
	engineCfg := func(name, rollout string) engineConfig {
		dir := t.TempDir()
		return engineConfig{NATSURL: srv.URL(), Rollout: rollout, Drain: 2, HTTPPort: testproc.FreePort(t), WorkingDir: dir, NATSYAML: asUser(t, dir, "engine")}
	}
	a := start(t, "A", engineCfg("A", "v1"))
	a.waitState("serving", 20*time.Second)
	a.waitHTTP("/readyz", 200, 10*time.Second)

	nc := natstest.Connect(t, srv.URL(), nats.UserInfo("caller", userPassword))
	tr, err := client.NewTransport(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 60*time.Second)
	kv, objects := client.NewKeyValue(tr), client.NewObjectStorage(tr)
	if err := kv.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatalf("keyvalue set as caller: %v", err)
	}
	if v, ok, err := kv.Get(ctx, "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("keyvalue get as caller: %q %v %v", v, ok, err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB: a transfer up, a parked reply down
	if err := objects.PutObject(ctx, "p", "big", big); err != nil {
		t.Fatalf("put a large object (a transfer) as caller: %v", err)
	}
	if got, err := objects.GetObject(ctx, "p", "big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("get a large object (a parked reply) as caller: %d bytes, %v", len(got), err)
	}
	if got, err := objects.DownloadObject(ctx, "p", "big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("download a large object (a transfer) as caller: %d bytes, %v", len(got), err)
	}

	// A caller cannot touch the lease bucket: not read its stream, not write its key.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := js.KeyValue(short, "ABI_ENGINE"); err == nil {
		t.Error("a caller opened the lease bucket")
	}
	cancel()
	if err := nc.Publish("$KV.ABI_ENGINE.owner", []byte(`{"instance_id":"forged"}`)); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()

	statusDir := t.TempDir()
	writeConfig(t, statusDir, fmt.Sprintf("nats:\n  url: %q\n%s", srv.URL(), asUser(t, statusDir, "status")))
	if code, out := runCommand(t, statusDir, nil, "status"); code != 0 || !strings.Contains(out, a.instanceID()) {
		t.Fatalf("status as user status: exit %d\n%s", code, out)
	}

	cdir := t.TempDir()
	c := start(t, "client", engineConfig{NATSURL: srv.URL(), Role: "client", HTTPPort: testproc.FreePort(t), WorkingDir: cdir, NATSYAML: asUser(t, cdir, "client")})
	c.waitState("client", 20*time.Second)
	c.waitHTTP("/readyz", 200, 10*time.Second)

	b := start(t, "B", engineCfg("B", "v2"))
	b.waitState("standby", 20*time.Second)
	a.signal(syscall.SIGTERM)
	b.waitState("serving", 30*time.Second)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d after its handover", code)
	}
	if v, ok, err := kv.Get(ctx, "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("keyvalue get after the handover: %q %v %v", v, ok, err)
	}
	if got, err := objects.GetObject(ctx, "p", "big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("get a large object after the handover: %d bytes, %v", len(got), err)
	}
	if err := objects.PutObject(ctx, "p", "big", []byte("small now")); err != nil { // its chunks purged
		t.Fatalf("replace an object: %v", err)
	}
	if err := objects.DeleteObject(ctx, "p", "big"); err != nil {
		t.Fatalf("delete an object: %v", err)
	}
	if _, err := kv.Delete(ctx, "k"); err != nil {
		t.Fatalf("keyvalue delete: %v", err)
	}
	// The forged write never reached the lease: B holds it.
	if code, out := runCommand(t, statusDir, nil, "status"); code != 0 || !strings.Contains(out, b.instanceID()) {
		t.Fatalf("status after the handover: exit %d\n%s", code, out)
	}
	for _, p := range []*proc{a, b, c} {
		noViolation(t, p)
	}
}

// TestOperatorCommandsUnderLeastPrivilege runs the operator's commands under the
// operator set of docs/security.md against engines under the engine set: doctor finds
// every bucket readable, step-down --to hands the lease to the named rollout, and
// evict --force deletes the lease of a live holder. None of them, and no engine, hits a
// permission it lacks.
func TestOperatorCommandsUnderLeastPrivilege(t *testing.T) {
	blocks := permissionBlocks(t)
	srv := privilegedBroker(t, blocks)
	engineCfg := func(rollout string) engineConfig {
		dir := t.TempDir()
		return engineConfig{NATSURL: srv.URL(), Rollout: rollout, Drain: 1, HTTPPort: testproc.FreePort(t), WorkingDir: dir, NATSYAML: asUser(t, dir, "engine")}
	}
	a := start(t, "A", engineCfg("v1"))
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineCfg("v2"))
	b.waitState("standby", 20*time.Second)

	op := t.TempDir()
	writeConfig(t, op, fmt.Sprintf("nats:\n  url: %q\n%sservices:\n  keyvalue: {adapter: jetstream}\n  object_storage: {adapter: jetstream}\n",
		srv.URL(), asUser(t, op, "operator")))
	operator := func(args ...string) (int, string) {
		t.Helper()
		code, out := runCommand(t, op, nil, args...)
		if strings.Contains(strings.ToLower(out), "permission") {
			t.Errorf("abi-engine %v as operator met a permission it lacks:\n%s", args, out)
		}
		return code, out
	}

	// The buckets exist once A serves: doctor reads each one's settings.
	code, out := operator("doctor")
	if code != 0 {
		t.Fatalf("doctor as operator: exit %d\n%s", code, out)
	}
	for _, check := range []string{"lease bucket", "keyvalue bucket", "object_storage bucket"} {
		if !regexp.MustCompile(`(?m)^OK\s+` + regexp.QuoteMeta(check)).MatchString(out) {
			t.Errorf("doctor as operator did not find the %s readable:\n%s", check, out)
		}
	}

	if code, out := operator("step-down", "--to", "v2", "--timeout", "30s"); code != 0 || !strings.Contains(out, "handed over: "+b.instanceID()) {
		t.Fatalf("step-down --to v2 as operator: exit %d\n%s", code, out)
	}
	b.waitState("serving", 20*time.Second)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d after stepping down", code)
	}

	c := start(t, "C", engineCfg("v3"))
	c.waitState("standby", 20*time.Second)
	// Read before the eviction: the evicted holder exits, and its /status with it.
	holder := b.instanceID()
	if code, out := operator("evict", "--force"); code != 0 || !strings.Contains(out, "evicted "+holder) {
		t.Fatalf("evict --force as operator: exit %d\n%s", code, out)
	}
	// The delete reached the lease: its holder sees a write not its own.
	b.waitLog(`"event":"evicted"`, 20*time.Second)
	for _, p := range []*proc{a, b, c} {
		noViolation(t, p)
	}
}

// TestEngineWithoutAPermissionIsNotReady: a serving engine whose user may not
// subscribe to the keyvalue service logs the violation naming the subject, and answers
// /readyz 503 with /status saying why. Before, it reported serving, and the only trace
// was bare text in the log.
func TestEngineWithoutAPermissionIsNotReady(t *testing.T) {
	blocks := permissionBlocks(t)
	crippled := &server.User{Username: "crippled", Password: userPassword, Permissions: &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"abi.svc.keyvalue.>"}},
	}}
	srv := privilegedBroker(t, blocks, crippled)
	dir := t.TempDir()
	p := start(t, "engine", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t), WorkingDir: dir, NATSYAML: asUser(t, dir, "crippled")})
	p.waitState("serving", 20*time.Second)
	p.waitLog(`"event":"permission_violation"`, 20*time.Second)
	body := p.waitHTTP("/readyz", 503, 20*time.Second)
	if !strings.Contains(body, "abi.svc.keyvalue.v1.") {
		t.Errorf("/readyz says %q, naming no keyvalue subject", body)
	}
	if !strings.Contains(p.out.String(), `"subject":"abi.svc.keyvalue.v1.`) {
		t.Errorf("the violation's log entry names no keyvalue subject:\n%s", p.out.String())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, status, _ := p.get("/status")
		if strings.Contains(status, `"not_ready"`) && strings.Contains(status, "abi.svc.keyvalue.v1.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status does not say why it is not ready (readyz %q):\n%s", body, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := p.metric(t, `abi_engine_permission_violations_total{subject="abi.svc.keyvalue.v1.get"}`); v < 1 {
		t.Errorf("abi_engine_permission_violations_total for abi.svc.keyvalue.v1.get = %g", v)
	}
}
