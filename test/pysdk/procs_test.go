package pysdk

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testproc"
)

// The processes of the deploy tests: abi-engine, SDK clients, naas-abi-module. Each is
// another program, so a wait polls its answer (HTTP, its output): there is no event to
// wait on in this process.

// proc is one process the test started; its cleanup kills it if it still runs and
// logs its output when the test failed.
type proc struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	out     *testproc.Output
	exited  chan struct{}
	waitErr error
}

func startProc(t testing.TB, name, dir string, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: &testproc.Output{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("--- %s output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitCode waits up to d for the process to exit and returns its status.
func (p *proc) exitCode(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %s", p.name, d)
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	}
	if p.waitErr != nil {
		p.t.Fatalf("%s: %v", p.name, p.waitErr)
	}
	return 0
}

// waitOutput waits until the process has written s.
func (p *proc) waitOutput(s string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.out.String(), s) {
		if !p.running() {
			p.t.Fatalf("%s exited before writing %q", p.name, s)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s wrote no %q within %s", p.name, s, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastJSON decodes the last line of the process's output that is a JSON object.
func (p *proc) lastJSON(v any) {
	p.t.Helper()
	sc := bufio.NewScanner(strings.NewReader(p.out.String()))
	sc.Buffer(nil, 16<<20)
	var last string
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "{") {
			last = line
		}
	}
	if err := json.Unmarshal([]byte(last), v); err != nil {
		p.t.Fatalf("%s: no JSON summary in its output (%v)", p.name, err)
	}
}

// engineProc is an abi-engine process with its HTTP listener.
type engineProc struct {
	*proc
	http string
}

// deployConfig is an engine on the test's broker with the shared backends a rollout
// needs, the service token secret and discovery for project pysdk.
func deployConfig(natsURL, secretFile string, httpPort int) string {
	return fmt.Sprintf(`nats:
  url: %q
  jwt_secret_file: %q
  engine: {role: serve, lease_seconds: 2, drain_seconds: 5, standby_timeout_seconds: 120}
  discovery: {project: pysdk, lease_seconds: 5}
services:
  keyvalue: {adapter: jetstream}
  object_storage: {adapter: jetstream}
http: {listen: "127.0.0.1:%d"}
log: {level: info, format: json}
`, natsURL, secretFile, httpPort)
}

// startEngine runs `abi-engine run` with cfg as rollout (ABI_ROLLOUT_ID).
func startEngine(t testing.TB, bin, name, rollout, cfg string, httpPort int) *engineProc {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, name, dir, []string{"ABI_ROLLOUT_ID=" + rollout}, bin, "run", "--config", path)
	return &engineProc{proc: p, http: fmt.Sprintf("127.0.0.1:%d", httpPort)}
}

func (e *engineProc) get(path string) (int, string, error) {
	resp, err := http.Get("http://" + e.http + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// counter sums the samples of a metric of the engine's /metrics whose labels include
// every one of labels.
func (e *engineProc) counter(name string, labels ...string) float64 {
	e.t.Helper()
	code, body, err := e.get("/metrics")
	if err != nil || code != http.StatusOK {
		e.t.Fatalf("%s /metrics: %d %v", e.name, code, err)
	}
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		matched := true
		for _, l := range labels {
			matched = matched && strings.Contains(line, l)
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); matched && err == nil {
			sum += v
		}
	}
	return sum
}

// status is the part of /status the tests read.
type status struct {
	State      string `json:"state"`
	InstanceID string `json:"instance_id"`
}

// waitState polls /status until the engine's state is want and returns the status.
func (e *engineProc) waitState(want string, within time.Duration) status {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		_, body, err := e.get("/status")
		var st status
		if err == nil && json.Unmarshal([]byte(body), &st) == nil && st.State == want {
			return st
		}
		last = body
		if !e.running() {
			e.t.Fatalf("%s exited while waiting for state %s", e.name, want)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: state %s not reached within %s (last %q %v)", e.name, want, within, last, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// moduleProc is a naas-abi-module process with its health probe.
type moduleProc struct {
	*proc
	id     string
	health string
}

// startModule runs the SDK's module runner on pysdk_module as module id, with its
// probe on healthPort.
func startModule(t testing.TB, py, natsURL, token, id string, healthPort int) *moduleProc {
	t.Helper()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"ABI_SERVICE_TOKEN=" + token, "PYSDK_MODULE_ID=" + id,
		"PYTHONPATH=" + filepath.Join(here, "modules"), "PYTHONDONTWRITEBYTECODE=1",
		fmt.Sprintf("ABI_HEALTH_PORT=%d", healthPort), "ABI_HEALTH_HOST=127.0.0.1",
	}
	p := startProc(t, "module "+id, here, env, py, "-m", "naas_abi_sdk.module_runner", "pysdk_module",
		"--url", natsURL, "--discovery-project", "pysdk")
	return &moduleProc{proc: p, id: id, health: fmt.Sprintf("http://127.0.0.1:%d/ready", healthPort)}
}

// ready reads the module's /ready probe: 200 READY, else the status it reports.
func (m *moduleProc) ready() (bool, string) {
	resp, err := http.Get(m.health)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "READY", fmt.Sprintf("%d %s", resp.StatusCode, b)
}

func (m *moduleProc) waitReady(within time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := m.ready()
		if ok {
			return
		}
		if !m.running() {
			m.t.Fatalf("%s exited before its /ready said READY", m.name)
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("%s: /ready not READY within %s (last %s)", m.name, within, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyWatch polls every module's /ready until stopped and keeps each answer that was
// not READY: the modules must stay READY through the handovers.
type readyWatch struct {
	stop   chan struct{}
	done   chan struct{}
	polls  int
	failed []string
}

func watchReady(mods ...*moduleProc) *readyWatch {
	w := &readyWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, m := range mods {
				w.polls++
				if ok, got := m.ready(); !ok {
					w.failed = append(w.failed, fmt.Sprintf("%s at %s: %s", m.id, time.Now().Format("15:04:05.000"), got))
				}
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// halt stops the watch and waits for its goroutine.
func (w *readyWatch) halt() {
	close(w.stop)
	<-w.done
}

// moduleInstance is one row of `abi-engine modules --json`.
type moduleInstance struct {
	ModuleID   string `json:"module_id"`
	InstanceID string `json:"instance_id"`
	Status     string `json:"status"`
	ExpiresAt  string `json:"expires_at"`
}

// listModules runs `abi-engine modules --json` against the serving engine and returns
// module id → instance ids.
func listModules(t testing.TB, bin, natsURL, secretFile string) map[string][]moduleInstance {
	t.Helper()
	cmd := exec.Command(bin, "modules", "--nats", natsURL, "--project", "pysdk", "--jwt-secret-file", secretFile, "--json")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = append(out, ee.Stderr...)
		}
		t.Fatalf("abi-engine modules: %v\n%s", err, out)
	}
	var list struct {
		Instances []moduleInstance `json:"instances"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("abi-engine modules --json: %v\n%s", err, out)
	}
	byModule := map[string][]moduleInstance{}
	for _, in := range list.Instances {
		byModule[in.ModuleID] = append(byModule[in.ModuleID], in)
	}
	return byModule
}

// waitRenewed waits until every module's registration was renewed after this call,
// as the serving engine's registry shows it: its expiry moved on.
func waitRenewed(t testing.TB, bin, natsURL, secretFile string, mods []*moduleProc, within time.Duration) {
	t.Helper()
	first := listModules(t, bin, natsURL, secretFile)
	deadline := time.Now().Add(within)
	for _, m := range mods {
		if len(first[m.id]) != 1 {
			t.Fatalf("abi-engine modules: %s is %+v, want one instance", m.id, first[m.id])
		}
		for {
			now := listModules(t, bin, natsURL, secretFile)[m.id]
			if len(now) == 1 && now[0].ExpiresAt != first[m.id][0].ExpiresAt {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s was not renewed within %s (registry: %+v)", m.id, within, now)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// secretFileIn writes secret, the engine's HS256 service-token secret, into dir and
// returns its path (nats.jwt_secret_file).
func secretFileIn(t *testing.T, dir string, secret []byte) string {
	t.Helper()
	f := filepath.Join(dir, "jwt-secret")
	if err := os.WriteFile(f, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// tokenFor is a service token for caller, signed with secret and valid for ttl from now.
func tokenFor(t *testing.T, secret []byte, caller string, ttl time.Duration) string {
	t.Helper()
	tok, err := servicetoken.Mint(secret, caller, time.Now(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
