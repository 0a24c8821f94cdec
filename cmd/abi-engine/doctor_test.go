package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// doctorLine is the line of check in doctor's output, "" when there is none.
func doctorLine(out, check string) string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && (f[0] == "OK" || f[0] == "WARN" || f[0] == "FAIL") && strings.HasPrefix(strings.Join(f[1:], " "), check) {
			return l
		}
	}
	return ""
}

func wantVerdict(t *testing.T, r result, check, verdict string, subs ...string) {
	t.Helper()
	l := doctorLine(r.stdout, check)
	if !strings.HasPrefix(l, verdict+" ") {
		t.Fatalf("check %q: want %s, got line %q in:\n%s", check, verdict, l, r)
	}
	wantContains(t, check, r.stdout, subs...)
}

func js(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	j, err := jetstream.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// withMonitor serves the server's HTTP monitoring on a random port of 127.0.0.1.
func withMonitor(o *server.Options) { o.HTTPHost, o.HTTPPort = "127.0.0.1", -1 }

func monitorURL(s *natstest.Server) string { return "http://" + s.Raw().MonitorAddr().String() }

func TestDoctorDefaultSetupPasses(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	r := runCLI(t, nil, "doctor", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "jetstream", "OK", "enabled for this account")
	wantVerdict(t, r, "server version", "OK", "nats-server 2.")
	wantVerdict(t, r, "lease bucket", "OK", "ABI_ENGINE does not exist yet: the first engine creates it with history 1, file storage, no TTL, R1")
	wantVerdict(t, r, "keyvalue bucket", "OK", "does not exist yet")
	wantVerdict(t, r, "object_storage bucket", "OK", "does not exist yet")
	wantVerdict(t, r, "round trip", "OK")
	// A user outside the system account cannot read the server's settings: said, not failed.
	wantVerdict(t, r, "ping interval", "WARN", "cannot read the server's ping_interval", "give one with --monitor")
	wantVerdict(t, r, "fsync", "WARN", "cannot read the server's sync_interval")
	wantContains(t, "summary", r.stdout, " 0 FAIL")
	if doctorLine(r.stdout, "drain") != "" {
		t.Errorf("drain checked without --termination-grace:\n%s", r.stdout)
	}

	// As an engine created it, and doctor creates nothing.
	if _, err := jetstreamstore.Open(context.Background(), natstest.Connect(t, srv.URL()), jetstreamstore.Config{}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "doctor", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "lease bucket", "OK", "ABI_ENGINE exists with history 1, file storage, no TTL, R1")
	if _, err := js(t, srv.URL()).KeyValue(context.Background(), "ABI_KV"); err == nil {
		t.Error("doctor created the keyvalue bucket")
	}
}

func TestDoctorFailsLeaseBucketThatCanLoseTheLease(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	_, err := js(t, srv.URL()).CreateKeyValue(context.Background(), jetstream.KeyValueConfig{
		Bucket: jetstreamstore.DefaultBucket, History: 1, Storage: jetstream.MemoryStorage, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "doctor", "--nats", srv.URL())
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "lease bucket", "FAIL", "storage is memory (want file)", "ttl (max age) is 30s (want none)",
		"fix: nats stream edit KV_ABI_ENGINE")
	wantContains(t, "summary", r.stdout, " 1 FAIL")
}

func TestDoctorFailsDataBucketThatLosesData(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	if _, err := js(t, srv.URL()).CreateKeyValue(context.Background(), jetstream.KeyValueConfig{
		Bucket: "ABI_KV", Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "doctor", "--nats", srv.URL())
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "keyvalue bucket", "FAIL", "keyvalue bucket ABI_KV (stream KV_ABI_KV)", "storage is memory (want file)")
	wantVerdict(t, r, "object_storage bucket", "OK")

	// With postgres for keyvalue the bucket is none of the engine's business.
	dir := t.TempDir()
	cfg := writeFile(t, dir, "pg.yaml", "services:\n  keyvalue: {adapter: postgres, dsn: \"postgres://abi@db/abi\"}\n")
	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--config", cfg)
	wantCode(t, r, exitOK)
	if doctorLine(r.stdout, "keyvalue bucket") != "" {
		t.Errorf("keyvalue bucket checked with the postgres adapter:\n%s", r.stdout)
	}
}

func TestDoctorFailsWithoutJetStream(t *testing.T) {
	srv := natstest.Start(t, natstest.WithoutJetStream())
	t.Chdir(t.TempDir())
	r := runCLI(t, nil, "doctor", "--nats", srv.URL())
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "jetstream", "FAIL", "JetStream does not answer", "fix: enable JetStream")
}

func TestDoctorFailsWithoutBroker(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.URL()
	srv.Stop()
	t.Chdir(t.TempDir())
	r := runCLI(t, nil, "doctor", "--nats", url)
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "broker", "FAIL", "connect to NATS at "+url)
}

func TestDoctorServerVersion(t *testing.T) {
	for _, c := range []struct {
		version   string
		jetstream bool
		want      verdict
	}{
		{"2.10.22", false, verdictFail},
		{"2.11.4", true, verdictFail}, // no atomic batch publish for the data buckets
		{"2.11.4", false, verdictOK},
		{"2.12.0", true, verdictOK},
		{"2.15.3", true, verdictOK},
		{"nightly", true, verdictWarn},
	} {
		if got := versionFinding(c.version, c.jetstream); got.Verdict != c.want {
			t.Errorf("version %s (jetstream data %v): %s %s, want %s", c.version, c.jetstream, got.Verdict, got.Reason, c.want)
		}
	}
}

func TestDoctorPingInterval(t *testing.T) {
	t.Chdir(t.TempDir())
	// nats-server's default: 2m, 2 pings out.
	def := natstest.Start(t, withMonitor)
	r := runCLI(t, nil, "doctor", "--nats", def.URL(), "--monitor", monitorURL(def))
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "ping interval", "WARN", "ping_interval 2m0s, ping_max 2", "for up to 6m0s", `fix: set ping_interval: "6s"`)

	quick := natstest.Start(t, withMonitor, func(o *server.Options) { o.PingInterval = 5 * time.Second })
	r = runCLI(t, nil, "doctor", "--nats", quick.URL(), "--monitor", monitorURL(quick))
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "ping interval", "OK", "ping_interval 5s, ping_max 2: a half-open connection is dropped within 15s")

	r = runCLI(t, nil, "doctor", "--nats", quick.URL(), "--monitor", "http://127.0.0.1:1")
	wantVerdict(t, r, "ping interval", "WARN", "cannot read the server's ping_interval: GET http://127.0.0.1:1/varz")
}

func TestDoctorFsync(t *testing.T) {
	t.Chdir(t.TempDir())
	lazy := natstest.Start(t, withMonitor)
	r := runCLI(t, nil, "doctor", "--nats", lazy.URL(), "--monitor", monitorURL(lazy))
	wantVerdict(t, r, "fsync", "WARN", "sync_interval 2m0s with an R1 lease bucket", "fix: set sync_interval: always")

	always := natstest.Start(t, withMonitor, func(o *server.Options) { o.SyncAlways = true })
	r = runCLI(t, nil, "doctor", "--nats", always.URL(), "--monitor", monitorURL(always))
	wantVerdict(t, r, "fsync", "OK", "sync_interval always")
}

func TestDoctorRoundTrip(t *testing.T) {
	lease := 20 * time.Second
	for _, c := range []struct {
		rtt  time.Duration
		want verdict
	}{
		{time.Millisecond, verdictOK},
		{time.Second, verdictWarn},
		{5 * time.Second, verdictFail},
	} {
		if got := rttFinding(c.rtt, lease); got.Verdict != c.want {
			t.Errorf("round trip %s against lease %s: %s %s, want %s", c.rtt, lease, got.Verdict, got.Reason, c.want)
		}
	}
}

func TestDoctorDrainAgainstGracePeriod(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	r := runCLI(t, nil, "doctor", "--nats", srv.URL(), "--termination-grace", "30s")
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "drain", "FAIL", "terminationGracePeriodSeconds 30s is not above drain_seconds 1m0s")

	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--termination-grace", "65s")
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "drain", "WARN", "leaves 5s after drain_seconds")

	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--termination-grace", "120s")
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "drain", "OK")

	r = runCLI(t, nil, "doctor", "--nats", srv.URL(), "--termination-grace", "-1s")
	wantCode(t, r, exitUsage)
}

func TestDoctorReplicasOnCluster(t *testing.T) {
	c := natstest.StartCluster(t)
	t.Chdir(t.TempDir())
	url := c.Nodes[0].URL()
	r := runCLI(t, nil, "doctor", "--nats", url)
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "lease bucket", "WARN", "nats.engine.lease_replicas is 1 on a cluster of 3 servers",
		"the bucket lives on one node and cannot be read or written while that node is down\n")

	dir := t.TempDir()
	r3 := writeFile(t, dir, "r3.yaml", "nats:\n  engine: {lease_replicas: 3}\n")
	r = runCLI(t, nil, "doctor", "--nats", url, "--config", r3)
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "lease bucket", "OK", "R3")
	wantVerdict(t, r, "fsync", "OK", "R3 or more")

	r5 := writeFile(t, dir, "r5.yaml", "nats:\n  engine: {lease_replicas: 5}\n")
	r = runCLI(t, nil, "doctor", "--nats", url, "--config", r5)
	wantCode(t, r, exitRuntime)
	wantVerdict(t, r, "lease bucket", "FAIL", "nats.engine.lease_replicas is 5, but the JetStream with no domain has 3 JetStream server(s)")
}

// withSystemUser gives the server users: app (global account, JetStream) and sys
// (the system account), so doctor can read varz over NATS as sys.
func withSystemUser(o *server.Options) {
	sys := server.NewAccount("SYS")
	o.Accounts = []*server.Account{sys}
	o.SystemAccount = "SYS"
	o.Users = []*server.User{
		{Username: "app", Password: "app"},
		{Username: "sys", Password: "sys", Account: sys},
	}
}

func TestDoctorReadsVarzAsSystemUser(t *testing.T) {
	srv := natstest.Start(t, withSystemUser, func(o *server.Options) { o.PingInterval = 5 * time.Second })
	t.Chdir(t.TempDir())
	appURL := strings.Replace(srv.URL(), "nats://", "nats://app:app@", 1)
	sysURL := strings.Replace(srv.URL(), "nats://", "nats://sys:sys@", 1)
	r := runCLI(t, nil, "doctor", "--nats", appURL, "--monitor", sysURL)
	wantCode(t, r, exitOK)
	wantVerdict(t, r, "ping interval", "OK", "ping_interval 5s, ping_max 2")
	wantVerdict(t, r, "fsync", "WARN", "sync_interval 2m0s")
	if strings.Contains(r.stdout, "app:app@") {
		t.Errorf("doctor printed a password:\n%s", r.stdout)
	}

	// The engine's own user is not the system account's.
	r = runCLI(t, nil, "doctor", "--nats", appURL, "--monitor", appURL)
	wantVerdict(t, r, "ping interval", "WARN", "the user of --monitor is not in the system account")
}
