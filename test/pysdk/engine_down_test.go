package pysdk

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// downLease is the discovery lease of TestPythonSDKWhileNoEngineServes: short, so that
// the engine can stay down longer than it in little time (a module renews every
// lease/4).
const downLease = 2 * time.Second

// gap is how long after a call the test starts the first engine: within the SDK's
// window of 5 s.
const gap = 2 * time.Second

// TestPythonSDKWhileNoEngineServes runs the checks of the SDK notes' §7 that need the
// engine stopped, with the published SDK and real abi-engine processes on a broker
// with JetStream:
//
//   - C10: with no engine, the SDK's calls end in NoRespondersError once its retry
//     window is over, and a call made while nobody serves succeeds when an engine
//     starts 2 s later, within the window (sdk_noresponders.py).
//   - C15: a module (naas-abi-module) outlives an engine that stays down longer than
//     the discovery lease: when an engine serves again it renews or registers again
//     and stays up, READY, listed by `abi-engine modules`.
func TestPythonSDKWhileNoEngineServes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Python SDK suite builds and starts processes")
	}
	py := venv(t, python(t))
	dir := t.TempDir()
	bin := buildEngine(t, dir)
	srv := natstest.Start(t)

	secret := []byte("pysdk-down-secret-0123456789abcdef")
	secretFile := secretFileIn(t, dir, secret)
	token := tokenFor(t, secret, "sdk-down", time.Hour)
	engine := func(name string) *engineProc {
		port := testproc.FreePort(t)
		cfg := fmt.Sprintf(`nats:
  url: %q
  jwt_secret_file: %q
  engine: {role: serve, lease_seconds: 2, drain_seconds: 1}
  discovery: {project: pysdk, lease_seconds: %d}
services:
  keyvalue: {adapter: jetstream}
  object_storage: {adapter: memory}
http: {listen: "127.0.0.1:%d"}
log: {level: info, format: json}
`, srv.URL(), secretFile, int(downLease/time.Second), port)
		return startEngine(t, bin, name, "", cfg, port)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}

	// C10: nobody serves the account yet.
	client := startProc(t, "sdk_noresponders.py", here,
		[]string{"ABI_NATS_URL=" + srv.URL(), "ABI_TEST_TOKEN=" + token, "PYTHONDONTWRITEBYTECODE=1"},
		py, "sdk_noresponders.py")
	client.waitOutput(`"calling"`, 60*time.Second)
	// The gap the SDK notes' C10 names: the engine starts 2 s after the call, which the
	// SDK resends on "no responders" meanwhile.
	<-time.After(gap)
	first := engine("engine 1")
	if code := client.exitCode(60 * time.Second); code != 0 {
		t.Fatalf("sdk_noresponders.py exited %d:\n%s", code, client.out.String())
	}
	phases := phaseLines(t, client.out.String())
	t.Logf("no responders, as the SDK saw them: %v", phases)
	// naas_abi_sdk/no_responders.py: the window is min(5 s, timeout - 0.5 s), and the
	// broker's "no responders" is raised once it is over, never a timeout.
	if w := phases["window"]; w.Error != "NoRespondersError" || w.Seconds < 5 || w.Seconds >= 9.5 {
		t.Errorf("timeout 10 s: %s after %.3f s, want NoRespondersError after the SDK's 5 s window (before its 10 s deadline)", w.Error, w.Seconds)
	}
	if s := phases["short"]; s.Error != "NoRespondersError" || s.Seconds < 0.5 || s.Seconds >= 1 {
		t.Errorf("timeout 1 s: %s after %.3f s, want NoRespondersError after the 0.5 s window, before the 1 s deadline", s.Error, s.Seconds)
	}
	// A call made before an engine serves is resent until one does, within the window.
	if d := phases["delayed"]; d.Error != "none" || d.Value != "late" || d.Seconds < gap.Seconds() {
		t.Errorf("a set made while no engine served, with an engine started %s later: %s (read back %q after %.3f s), want it served within the SDK's 5 s window, after the gap", gap, d.Error, d.Value, d.Seconds)
	}

	// C15: a module outlives an engine down longer than the discovery lease.
	first.waitState("serving", 60*time.Second)
	mod := startModule(t, py, srv.URL(), token, "down.module", testproc.FreePort(t))
	mod.waitReady(60 * time.Second)
	before := listModules(t, bin, srv.URL(), secretFile)["down.module"]
	if len(before) != 1 || before[0].Status != "READY" {
		t.Fatalf("abi-engine modules: down.module is %+v, want one READY instance", before)
	}
	first.signal(syscall.SIGTERM)
	if code := first.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("engine 1 exited %d after SIGTERM, want 0", code)
	}
	stopped := time.Now()
	// The module's renews find no responders; once its confirmed lease lapses its probe
	// says UNAVAILABLE (naas_abi_sdk/health.py) ...
	waitProbe(t, mod, "503 UNAVAILABLE", 30*time.Second)
	// ... and the engine stays down until the registration's expiry is well past.
	expires, err := time.Parse(time.RFC3339Nano, before[0].ExpiresAt)
	if err != nil {
		t.Fatalf("expires_at %q: %v", before[0].ExpiresAt, err)
	}
	if wait := time.Until(expires.Add(downLease)); wait > 0 {
		<-time.After(wait)
	}
	down := time.Since(stopped)
	second := engine("engine 2")
	second.waitState("serving", 60*time.Second)
	mod.waitReady(60 * time.Second)
	if !mod.running() {
		t.Fatal("the module exited while no engine served")
	}
	after := listModules(t, bin, srv.URL(), secretFile)["down.module"]
	if len(after) != 1 || after[0].Status != "READY" {
		t.Fatalf("abi-engine modules after the restart: down.module is %+v, want one READY instance", after)
	}
	same := after[0].InstanceID == before[0].InstanceID
	t.Logf("engine down %s (discovery lease %s); the module stayed up and registered again, instance id %s → %s (same: %v)",
		down.Round(time.Millisecond), downLease, before[0].InstanceID, after[0].InstanceID, same)
}

// phase is one JSON line of sdk_noresponders.py.
type phase struct {
	Phase   string  `json:"phase"`
	Error   string  `json:"error"`
	Value   string  `json:"value"`
	Seconds float64 `json:"seconds"`
}

// phaseLines reads the JSON lines of out by phase.
func phaseLines(t *testing.T, out string) map[string]phase {
	t.Helper()
	got := map[string]phase{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var p phase
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("sdk_noresponders.py: %q: %v", line, err)
		}
		got[p.Phase] = p
	}
	return got
}

// waitProbe polls the module's /ready until it answers want ("<code> <body>").
func waitProbe(t *testing.T, m *moduleProc, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, got := m.ready()
		if strings.TrimSpace(got) == want {
			return
		}
		if !m.running() {
			t.Fatalf("%s exited while waiting for /ready %q", m.name, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /ready not %q within %s (last %q)", m.name, want, within, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
