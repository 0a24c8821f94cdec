package pysdk

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// transfers says whether the engine serves the SDK's object transfers in protobuf: the
// clients then read every object through the facade's get_object (a transfer) and put
// every third one above the facade's 64 KiB unary limit (a transfer too). Set it false
// to read with the generated unary get_object and put nothing above 64 KiB.
const transfers = true

// deployClients and the handovers are those of the issue: eight SDK clients, v1 → v2 → v3.
const deployClients = 8

// TestRollingDeployUnderThePythonSDK: on a nats-server with JetStream, eight processes
// of the published SDK (keyvalue set/get of fresh keys, object put/get) and two
// long-lived modules run by the SDK's naas-abi-module, while abi-engine v1 hands over
// to v2 and v2 to v3 (ABI_ROLLOUT_ID, SIGTERM). No SDK call fails, every acknowledged
// write reads back from v3, both modules' /ready says READY at every poll, and
// `abi-engine modules` lists them before and after under the same instance ids.
func TestRollingDeployUnderThePythonSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the deploy test builds and starts processes")
	}
	py := venv(t, python(t))
	dir := t.TempDir()
	bin := buildEngine(t, dir)
	srv := natstest.Start(t)

	secret := []byte("pysdk-deploy-secret-0123456789abcdef")
	secretFile := secretFileIn(t, dir, secret)
	token := tokenFor(t, secret, "sdk-deploy", time.Hour)
	engine := func(rollout string) *engineProc {
		port := testproc.FreePort(t)
		return startEngine(t, bin, rollout, rollout, deployConfig(srv.URL(), secretFile, port), port)
	}

	serving := engine("v1")
	serving.waitState("serving", 60*time.Second)
	mods := []*moduleProc{
		startModule(t, py, srv.URL(), token, "deploy.alpha", testproc.FreePort(t)),
		startModule(t, py, srv.URL(), token, "deploy.beta", testproc.FreePort(t)),
	}
	for _, m := range mods {
		m.waitReady(60 * time.Second)
	}
	before := listModules(t, bin, srv.URL(), secretFile)
	ids := map[string]string{}
	for _, m := range mods {
		got := before[m.id]
		if len(got) != 1 || got[0].Status != "READY" {
			t.Fatalf("abi-engine modules before the deploy: %s is %+v, want one READY instance", m.id, got)
		}
		ids[m.id] = got[0].InstanceID
	}
	watch := watchReady(mods...)

	tf := startTraffic(t, py, srv.URL(), token, dir, deployClients)
	tf.waitProgress(3, 60*time.Second)
	started := time.Now()
	for _, rollout := range []string{"v2", "v3"} {
		next := engine(rollout)
		next.waitState("standby", 60*time.Second)
		tf.waitProgress(3, 30*time.Second)
		serving.signal(syscall.SIGTERM)
		if code := serving.exitCode(30 * time.Second); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM, want 0", serving.name, code)
		}
		next.waitState("serving", 30*time.Second)
		serving = next
		// Each module renews with the new engine (every 1.25 s with the discovery
		// lease of 5 s) while the clients keep calling it.
		waitRenewed(t, bin, srv.URL(), secretFile, mods, 30*time.Second)
		tf.waitProgress(3, 30*time.Second)
	}
	deploy := time.Since(started)
	calls := tf.halt()
	watch.halt()

	if len(watch.failed) > 0 {
		t.Errorf("a module's /ready was not READY at %d of %d polls, first: %s", len(watch.failed), watch.polls, watch.failed[0])
	}
	after := listModules(t, bin, srv.URL(), secretFile)
	for _, m := range mods {
		got := after[m.id]
		if len(got) != 1 || got[0].InstanceID != ids[m.id] || got[0].Status != "READY" {
			t.Errorf("abi-engine modules after the deploy: %s is %+v, want READY instance %s as before", m.id, got, ids[m.id])
		}
	}
	read, acked := tf.verify()
	if transfers {
		// The SDK falls back to the unary get_object only when a transfer open found no
		// responder: v3 served every object get, the verify's included, as a transfer.
		if n := serving.counter("abi_engine_requests_total", `service="object_storage"`, `operation="get_object"`); n != 0 {
			t.Errorf("v3 served %v unary get_object calls: object gets fell back from transfers", n)
		}
	}
	t.Logf("two handovers in %s under %d SDK clients: %d calls; %d acknowledged writes read back from v3; /ready polled %d times",
		deploy.Round(time.Millisecond), deployClients, calls, acked, watch.polls)
	if read != acked {
		t.Fatalf("read back %d of %d acknowledged writes", read, acked)
	}
	for _, m := range mods {
		m.signal(syscall.SIGTERM)
		if code := m.exitCode(30 * time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", m.name, code)
		}
	}
}

// traffic is the SDK client processes of sdk_traffic.py and the files where each
// lists the writes the engine acknowledged.
type traffic struct {
	t       testing.TB
	py      string
	env     []string
	clients []*proc
	acked   []string
}

func startTraffic(t testing.TB, py, natsURL, token, dir string, clients int) *traffic {
	t.Helper()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	tf := &traffic{t: t, py: py, env: []string{"ABI_NATS_URL=" + natsURL, "ABI_SERVICE_TOKEN=" + token, "PYTHONDONTWRITEBYTECODE=1"}}
	run := fmt.Sprintf("deploy%d", time.Now().UnixNano())
	for i := range clients {
		acked := filepath.Join(dir, fmt.Sprintf("acked-%d.jsonl", i))
		args := []string{filepath.Join(here, "sdk_traffic.py"), "write", "--client", fmt.Sprint(i), "--run", run, "--acked", acked}
		if transfers {
			args = append(args, "--big-objects")
		} else {
			args = append(args, "--unary-get")
		}
		tf.clients = append(tf.clients, startProc(t, fmt.Sprintf("sdk client %d", i), here, tf.env, py, args...))
		tf.acked = append(tf.acked, acked)
	}
	for _, c := range tf.clients {
		c.waitOutput(`{"started"`, 60*time.Second)
	}
	return tf
}

// waitProgress waits until every client has n more acknowledged writes than now: the
// traffic runs on both sides of a step.
func (tf *traffic) waitProgress(n int, within time.Duration) {
	tf.t.Helper()
	base := make([]int, len(tf.acked))
	for i, f := range tf.acked {
		base[i] = countLines(f)
	}
	deadline := time.Now().Add(within)
	for i, f := range tf.acked {
		for countLines(f) < base[i]+n {
			if !tf.clients[i].running() {
				tf.t.Fatalf("%s exited while the deploy ran", tf.clients[i].name)
			}
			if time.Now().After(deadline) {
				tf.t.Fatalf("%s acknowledged %d writes in %s, want %d", tf.clients[i].name, countLines(f)-base[i], within, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// halt stops every client by SIGTERM, checks that none saw a failed call, and returns
// how many calls they made.
func (tf *traffic) halt() int {
	tf.t.Helper()
	for _, c := range tf.clients {
		c.signal(syscall.SIGTERM)
	}
	calls := 0
	for _, c := range tf.clients {
		if code := c.exitCode(30 * time.Second); code != 0 {
			tf.t.Fatalf("%s exited %d", c.name, code)
		}
		var sum struct {
			Calls  int      `json:"calls"`
			Failed []string `json:"failed"`
		}
		c.lastJSON(&sum)
		if len(sum.Failed) > 0 {
			tf.t.Errorf("%s: %d of %d calls failed, first: %s", c.name, len(sum.Failed), sum.Calls, sum.Failed[0])
		}
		calls += sum.Calls
	}
	return calls
}

// verify reads every acknowledged write back through the serving engine and returns
// how many read back intact and how many there were.
func (tf *traffic) verify() (read, acked int) {
	tf.t.Helper()
	if acked = tf.ackedCount(); acked == 0 {
		tf.t.Fatal("no write was acknowledged: nothing to read back")
	}
	here, _ := filepath.Abs(".")
	args := append([]string{filepath.Join(here, "sdk_traffic.py"), "verify"}, "--acked")
	args = append(args, tf.acked...)
	if !transfers {
		args = append(args, "--unary-get")
	}
	v := startProc(tf.t, "sdk verify", here, tf.env, tf.py, args...)
	if code := v.exitCode(120 * time.Second); code != 0 {
		tf.t.Fatalf("sdk_traffic.py verify exited %d", code)
	}
	var res struct {
		Read int      `json:"read"`
		Bad  []string `json:"bad"`
	}
	v.lastJSON(&res)
	if len(res.Bad) > 0 {
		tf.t.Errorf("%d acknowledged writes did not read back, first: %s", len(res.Bad), res.Bad[0])
	}
	return res.Read - len(res.Bad), acked
}

// ackedCount is how many writes the clients have had acknowledged so far.
func (tf *traffic) ackedCount() int {
	n := 0
	for _, f := range tf.acked {
		n += countLines(f)
	}
	return n
}

// countLines counts the complete lines of a file the clients append to.
func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasSuffix(sc.Text(), "}") {
			n++
		}
	}
	return n
}
