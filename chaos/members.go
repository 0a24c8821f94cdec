package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/fault"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/lease"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// drainSeconds is the engines' drain: calls received before a handover are answered
// within it.
const drainSeconds = 2

// Pseudo-states a monitor records besides the engine's own.
const (
	stateEnded   = "ended"   // an in-process engine's Done closed
	stateExited  = "exited"  // a process exited
	stateUnknown = "unknown" // a process did not answer /status (paused, starting)
)

// member is an engine the scenario runs, in this process or as a child process.
type member interface {
	name() string
	id() string
	info() report.Instance
	servingIntervals() []check.Interval
	// stop ends the engine however it must (handover, or signals) and waits for it.
	stop()
}

// transition is a state an engine entered, and when.
type transition struct {
	at    time.Time
	state string
}

// monitor records an engine's states over time, from a poller the member owns.
type monitor struct {
	h       *harness
	subject string

	mu          sync.Mutex
	transitions []transition

	quit chan struct{}
	done chan struct{}
}

func newMonitor(h *harness, subject string) *monitor {
	return &monitor{h: h, subject: subject, quit: make(chan struct{}), done: make(chan struct{})}
}

// set records state if it differs from the current one.
func (m *monitor) set(state string) {
	m.mu.Lock()
	if n := len(m.transitions); n > 0 && m.transitions[n-1].state == state {
		m.mu.Unlock()
		return
	}
	now := time.Now()
	m.transitions = append(m.transitions, transition{at: now, state: state})
	m.mu.Unlock()
	if state != stateUnknown {
		m.h.event(report.KindState, m.subject, "%s", state)
	}
}

// current is the last state recorded.
func (m *monitor) current() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.transitions); n > 0 {
		return m.transitions[n-1].state
	}
	return ""
}

// entered is when the engine first entered state at or after t; zero if it has not.
func (m *monitor) entered(state string, t time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tr := range m.transitions {
		if tr.state == state && !tr.at.Before(t) {
			return tr.at
		}
	}
	return time.Time{}
}

// servingIntervals are the stretches the engine reported serving; an open one ends now.
func (m *monitor) servingIntervals() []check.Interval {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []check.Interval
	for i, tr := range m.transitions {
		if tr.state != string(engine.StateServing) {
			continue
		}
		to := time.Now()
		if i+1 < len(m.transitions) {
			to = m.transitions[i+1].at
		}
		out = append(out, check.Interval{Instance: m.subject, From: tr.at, To: to})
	}
	return out
}

// halt stops the poller and waits for it.
func (m *monitor) halt() {
	select {
	case <-m.quit:
	default:
		close(m.quit)
	}
	<-m.done
}

// inproc is an engine in this process.
type inproc struct {
	h       *harness
	nm      string
	rollout string
	eng     *engine.Engine
	proxy   *fault.Proxy
	mon     *monitor
	logFile *os.File
	stopped bool
}

// engineConfig is the configuration every engine of a scenario shares: role serve,
// the lease of the options, shared JetStream backends, no HTTP.
func (h *harness) engineConfig(url, rollout string) *config.Config {
	c := config.Default()
	c.NATS.URL = url
	c.NATS.Engine.Role = config.RoleServe
	c.NATS.Engine.RolloutID = rollout
	c.NATS.Engine.LeaseSeconds = h.lease.Seconds()
	c.NATS.Engine.DrainSeconds = drainSeconds
	c.NATS.Engine.StandbyTimeoutSeconds = 600
	c.NATS.Engine.LeaseReplicas = h.replicas
	c.Services.KeyValue.Adapter = config.KeyValueJetStream
	if h.opts.KeyValue == KeyValuePostgres {
		c.Services.KeyValue.Adapter = config.KeyValuePostgres
		c.Services.KeyValue.DSN, c.Services.KeyValue.Table = h.opts.PostgresURL, h.pgTable
	}
	c.Services.ObjectStorage.Adapter = config.ObjectStorageJetStream
	c.HTTP.Listen = ""
	c.NATS.JWTSecretFile = h.secretPath
	return c
}

// startInproc loads an engine in this process (through a proxy of its own when
// viaProxy), with the scenario's fail points fp besides the options' (failpointSpec),
// and returns once Load has returned: serving, or standing by.
func (h *harness) startInproc(rollout string, viaProxy bool, fp ...string) (*inproc, error) {
	nm, first := h.name()
	spec, err := h.failpointSpec(first, fp)
	if err != nil {
		return nil, err
	}
	withFailpoints, err := failpointOption(spec)
	if err != nil {
		return nil, err
	}
	m := &inproc{h: h, nm: nm, rollout: rollout, mon: newMonitor(h, nm)}
	url := h.url
	if viaProxy {
		p, err := h.proxy()
		if err != nil {
			return nil, err
		}
		m.proxy, url = p, p.URL()
	}
	cfg := h.engineConfig(url, rollout)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", nm, err)
	}
	f, err := os.Create(filepath.Join(h.logDir, nm+".log"))
	if err != nil {
		return nil, err
	}
	m.logFile = f
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(f), zapcore.InfoLevel))
	// A probe job records every run: jobs run only on the serving engine, and never on
	// two engines at once.
	probe := engine.Job{Name: "chaos-probe", Schedule: engine.Every(h.lease / 10), Run: func(context.Context) error {
		h.jobRun(m.eng.InstanceID())
		return nil
	}}
	opts := []engine.Option{engine.WithLogger(log), engine.WithJob(probe)}
	if withFailpoints != nil {
		opts = append(opts, withFailpoints)
	}
	eng, err := h.newEngine(cfg, opts...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", nm, err)
	}
	m.eng = eng
	h.addMember(m)
	go m.poll()
	h.event(report.KindStep, nm, "loading in-process engine %s (rollout %q)%s%s", report.Short(eng.InstanceID()), rollout,
		map[bool]string{true: " through a proxy", false: ""}[viaProxy], withSpec(spec))
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if err := eng.Load(ctx); err != nil {
		return m, fmt.Errorf("%s: load: %w", nm, err)
	}
	return m, nil
}

// poll records the engine's state every 5 ms until it ends or the monitor halts.
func (m *inproc) poll() {
	defer close(m.mon.done)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mon.set(string(m.eng.State()))
		select {
		case <-m.eng.Done():
			m.mon.set(stateEnded)
			detail := "shut down"
			if err := m.eng.Err(); err != nil {
				detail = "ended: " + err.Error()
			}
			m.h.event(report.KindExit, m.nm, "%s", detail)
			return
		case <-m.mon.quit:
			return
		case <-tick.C:
		}
	}
}

func (m *inproc) name() string { return m.nm }
func (m *inproc) id() string   { return m.eng.InstanceID() }

func (m *inproc) servingIntervals() []check.Interval { return m.mon.servingIntervals() }

// lost reports whether the engine ended because another holder took the lease.
func (m *inproc) lost() bool {
	select {
	case <-m.eng.Done():
		var le *lease.LostError
		return errors.As(m.eng.Err(), &le)
	default:
		return false
	}
}

func (m *inproc) info() report.Instance {
	in := report.Instance{Name: m.nm, ID: m.eng.InstanceID(), RolloutID: m.rollout}
	select {
	case <-m.eng.Done():
		in.End = "shut down"
		if err := m.eng.Err(); err != nil {
			in.End = "ended: " + err.Error()
		}
	default:
		in.End = "running (" + string(m.eng.State()) + ")"
	}
	return in
}

// shutdown hands over (or stops a standby) and waits.
func (m *inproc) shutdown() error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.h.ctx), 30*time.Second)
	defer cancel()
	return m.eng.Shutdown(ctx)
}

func (m *inproc) stop() {
	if !m.stopped {
		m.stopped = true
		if err := m.shutdown(); err != nil {
			m.h.logf("%s: shutdown: %v", m.nm, err)
		}
	}
	m.mon.halt()
	if m.logFile != nil {
		m.logFile.Close()
	}
}

// procMember is an engine running as a child process of the abi-engine binary.
type procMember struct {
	h        *harness
	nm       string
	rollout  string
	p        *fault.Process
	httpAddr string
	logPath  string
	mon      *monitor
	client   *http.Client

	mu       sync.Mutex
	instance string
}

// status is what the harness reads of GET /status.
type status struct {
	InstanceID string `json:"instance_id"`
	State      string `json:"state"`
}

// processConfig is the YAML of an engine process.
func (h *harness) processConfig(rollout, httpAddr string) string {
	return fmt.Sprintf(`nats:
  url: %q
  jwt_secret_file: %q
  engine:
    role: serve
    rollout_id: %q
    lease_seconds: %g
    drain_seconds: %d
    standby_timeout_seconds: 600
    lease_replicas: %d
%sservices:
  keyvalue: %s
  object_storage: {adapter: jetstream}
http:
  listen: %q
log:
  level: info
  format: json
`, h.url, h.secretPath, rollout, h.lease.Seconds(), drainSeconds, h.replicas, h.discoveryYAML(), h.keyValueYAML(), httpAddr)
}

// discoveryYAML is the nats.discovery of an engine process: the module registry, in
// the scenarios that host it.
func (h *harness) discoveryYAML() string {
	if !h.sc.Discovery {
		return ""
	}
	return fmt.Sprintf("  discovery: {project: %q, lease_seconds: %g}\n", discoveryProject, h.discoveryLease().Seconds())
}

// keyValueYAML is the services.keyvalue of an engine process.
func (h *harness) keyValueYAML() string {
	if h.opts.KeyValue == KeyValuePostgres {
		return fmt.Sprintf("{adapter: postgres, dsn: %q, table: %q}", h.opts.PostgresURL, h.pgTable)
	}
	return "{adapter: jetstream}"
}

// withSpec describes an engine's fail points in its start event.
func withSpec(spec string) string {
	if spec == "" {
		return ""
	}
	return ", fail points " + spec
}

// freeAddr picks a free port on 127.0.0.1 for an engine's HTTP server.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startProcess starts an engine process of rollout, with the scenario's fail points
// fp besides the options' (failpointSpec), and returns once it serves or stands by,
// loaded (its /readyz answers 200).
func (h *harness) startProcess(rollout string, fp ...string) (*procMember, error) {
	nm, first := h.name()
	spec, err := h.failpointSpec(first, fp)
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(h.work, nm)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(cfgPath, []byte(h.processConfig(rollout, addr)), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(h.logDir, nm+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// The environment wins over the file: clear what the harness's own might set.
	env := []string{config.EnvRole + "=", config.EnvRolloutID + "=", config.EnvNATSURL + "=", failpoint.EnvVar + "=" + spec}
	bin, args := h.opts.Binary, []string{"run", "--config", cfgPath}
	if bin == "" {
		// The embedder's engine in a child process of this program (EngineProcess).
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("%s: find this program to run its engine: %w", nm, err)
		}
		args, env = childArgs, append(env, envEngineConfig+"="+cfgPath)
	}
	p, err := fault.StartProcess(nm, bin, args, env, out)
	if err != nil {
		return nil, err
	}
	m := &procMember{
		h: h, nm: nm, rollout: rollout, p: p, httpAddr: addr, logPath: logPath, mon: newMonitor(h, nm),
		client: &http.Client{Timeout: 250 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	h.addMember(m)
	go m.poll()
	h.event(report.KindStep, nm, "started process %d (rollout %q)%s", p.PID(), rollout, withSpec(spec))
	err = h.waitFor(30*time.Second, nm+" loaded", func() bool { return m.ready() || p.Exited() })
	if err != nil {
		return m, err
	}
	if p.Exited() {
		return m, fmt.Errorf("%s exited with code %d while loading (log %s):\n%s", nm, p.ExitCode(), logPath, tail(logPath, 10))
	}
	return m, nil
}

// poll records the process's state from /status every 20 ms until it exits.
func (m *procMember) poll() {
	defer close(m.mon.done)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := m.status(); err == nil {
			m.mu.Lock()
			m.instance = st.InstanceID
			m.mu.Unlock()
			m.mon.set(st.State)
		} else {
			m.mon.set(stateUnknown)
		}
		select {
		case <-m.p.Done():
			m.mon.set(stateExited)
			m.h.event(report.KindExit, m.nm, "%s", m.end())
			return
		case <-m.mon.quit:
			return
		case <-tick.C:
		}
	}
}

func (m *procMember) status() (status, error) {
	var st status
	resp, err := m.client.Get("http://" + m.httpAddr + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /status: %s", resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// ready reports whether /readyz answers 200: loaded, and serving or standing by.
func (m *procMember) ready() bool {
	resp, err := m.client.Get("http://" + m.httpAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (m *procMember) name() string { return m.nm }

func (m *procMember) id() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.instance
}

func (m *procMember) servingIntervals() []check.Interval { return m.mon.servingIntervals() }

// end says how the process ended.
func (m *procMember) end() string {
	if !m.p.Exited() {
		return "running (" + m.mon.current() + ")"
	}
	if sig := m.p.Signaled(); sig != 0 {
		return fmt.Sprintf("killed (%s)", signalName(sig))
	}
	return fmt.Sprintf("exit %d", m.p.ExitCode())
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

func (m *procMember) info() report.Instance {
	return report.Instance{Name: m.nm, ID: m.id(), Process: true, PID: m.p.PID(), RolloutID: m.rollout, End: m.end()}
}

// wait waits for the process to exit, up to within.
func (m *procMember) wait(within time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(m.h.ctx, within)
	defer cancel()
	return m.p.Wait(ctx)
}

func (m *procMember) stop() {
	m.p.Stop(15 * time.Second)
	m.mon.halt()
}

// logged reports whether the process's log contains s.
func (m *procMember) logged(s string) bool {
	b, err := os.ReadFile(m.logPath)
	return err == nil && strings.Contains(string(b), s)
}

// tail is the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
