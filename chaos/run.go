package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/abi-engine/engine/internal/leakcheck"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/redact"
	"go.uber.org/goleak"
)

// Report is the outcome of a scenario (see package report).
type Report = report.Report

// Options shape a run. The zero value runs a scenario's short CI schedule with seed 0.
type Options struct {
	// Duration is how long the scenario keeps injecting faults; it repeats its fault
	// cycle until then. 0 runs the scenario's short fixed schedule (what CI runs).
	Duration time.Duration
	// Seed draws the fault schedule (which engine, when, how long) and the traffic's
	// keys and values. The same scenario, duration and seed replay the same schedule.
	Seed int64
	// Binary is the abi-engine binary the process scenarios run, or a binary of the
	// embedder's own with the same `run --config FILE` command line (its engine with
	// its services, the HTTP endpoints, the signals and exit codes of abi-engine run).
	// Without it, and with Engine set, the process scenarios run the embedder's engine
	// in child processes of this very program, which must call EngineProcess first
	// thing in main (or TestMain). Without either they fail to start.
	Binary string
	// Engine, when set, builds the engines of the run in place of engine.New: the
	// in-process scenarios call it, and so do the engine processes of EngineProcess.
	Engine EngineFunc
	// Workload, when set, is the traffic of the run in place of the kernel's keyvalue
	// workload: the calls of the embedder's own service and its model for the
	// linearizability checker. Scenarios that read keyvalue's storage themselves
	// (Scenario.KeyValueOnly) refuse it.
	Workload Workload
	// Out, when set, is a directory that receives report.json, timeline.svg,
	// history.json (every call recorded, one JSON object a line) and the engines' logs
	// (logs/). Without it the logs are discarded with the run's temporary directory.
	Out string
	// Log receives a line per step of the scenario as it happens; nil discards them.
	Log io.Writer
	// Lease is the engines' lease period (1 s unless set; whole or fractional seconds,
	// at least 1 s).
	Lease time.Duration
	// Concurrency is the number of traffic workers (8 unless set).
	Concurrency int
	// Retry replaces the client's retry policy (client.DefaultRetryPolicy unless set).
	// A policy with Window 0 turns the no-responders retry off, which shows what it
	// hides: calls fail in every handover.
	Retry *client.RetryPolicy
	// Failpoints switches fail points on in the engines, to show a checker catching
	// the bug each one is (a -tags failpoints build; docs/chaos.md lists them).
	Failpoints Failpoints
	// ClockRate is how fast clock-skew's fast lease clock runs against the real one
	// (1.5 unless set). Past lease/fence = 2 the engine is no longer safe.
	ClockRate float64
	// KeyValue is the keyvalue backend every engine shares: "jetstream" (the default)
	// or "postgres", on the database at PostgresURL, in a table of the run's own.
	KeyValue    string
	PostgresURL string
	// JWTSecret, when set, is the service tokens' secret: every engine of the run
	// requires tokens signed with it (nats.jwt_secret_file) and the harness's clients
	// sign theirs.
	JWTSecret []byte
	// Cluster runs a scenario that starts one broker (Scenario.OnCluster) on a 3-node
	// cluster of 127.0.0.1 instead, its buckets and the lease R3: zombie-write then
	// shows the epoch refusing a stale write on a replicated bucket.
	Cluster bool
	// Protobuf adds to the keyvalue traffic the same mix of calls in protobuf, as the
	// Python clients make them, on keys of their own and at once: a run then shows
	// that handovers lose no call of either codec. Protobuf calls need service tokens,
	// so without JWTSecret the run makes a secret of its own.
	Protobuf bool
}

// Keyvalue backends a run can share (Options.KeyValue).
const (
	KeyValueJetStream = "jetstream"
	KeyValuePostgres  = "postgres"
)

func (o Options) withDefaults() Options {
	if o.Lease <= 0 {
		o.Lease = time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.ClockRate <= 0 {
		o.ClockRate = 1.5
	}
	if o.KeyValue == "" {
		o.KeyValue = KeyValueJetStream
	}
	return o
}

// Scenario is one fault schedule with the invariants it checks.
type Scenario struct {
	Name        string
	Description string
	// Processes is true when the scenario runs the abi-engine binary (Options.Binary).
	Processes bool
	// Cluster is true when the scenario runs a 3-node cluster, whose start alone takes
	// up to about ten seconds.
	Cluster bool
	// OnCluster is true when the scenario may run on a 3-node cluster instead of one
	// broker (Options.Cluster).
	OnCluster bool
	// Failpoints is true when the scenario needs fail points (a -tags failpoints
	// build, of the harness and of Options.Binary).
	Failpoints bool
	// KeyValueOnly is true when the scenario's checks read what the keyvalue traffic
	// wrote (its storage), so it runs only the kernel's workload (Options.Workload
	// nil).
	KeyValueOnly bool
	// Discovery is true when the engines host the module registry (nats.discovery) and
	// the run drives module traffic: the engines then require service tokens.
	Discovery bool
	run       func(*harness) error
}

// Scenarios lists every scenario, in the order CI runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name:        "rolling-deploy",
			Description: "engine processes of successive rollouts replace each other by SIGTERM handovers under traffic; no call may fail",
			Processes:   true,
			run:         rollingDeploy,
		},
		{
			Name:        "kill-holder",
			Description: "the serving engine process is SIGKILLed and a replacement started; every call after the takeover window must be answered",
			Processes:   true,
			run:         killHolder,
		},
		{
			Name:        "pause-holder",
			Description: "the serving engine process is SIGSTOPped for longer than a lease while a standby takes over, then SIGCONTed: it must answer nothing more and exit as lost",
			Processes:   true,
			run:         pauseHolder,
		},
		{
			Name:         "zombie-write",
			Description:  "the holder is stalled between its lease check and a write, SIGSTOPped past a takeover, and resumed after its successor wrote the same key: storage must refuse its write by the epoch (no lost update in what storage committed)",
			Processes:    true,
			Failpoints:   true,
			KeyValueOnly: true,
			OnCluster:    true,
			run:          zombieWrite,
		},
		{
			Name:        "partition",
			Description: "the holder's connection to the broker is slowed, then cut through a TCP proxy: it must fence within lease/2, the standby take over only after a full lease, and the history stay linearizable",
			run:         partition,
		},
		{
			Name:        "clock-skew",
			Description: "one engine's lease clock runs --clock-rate times as fast (default 1.5; fail point clock-rate) while the holder's lease connection alone is cut: safe while the rate ratio stays below lease/fence = 2",
			Failpoints:  true,
			run:         clockSkew,
		},
		{
			Name:        "handover",
			Description: "in-process engines of successive rollouts hand over by Engine.Shutdown under traffic: no call fails, no job run overlaps, no serving gap",
			run:         handover,
		},
		{
			Name:        "broker-restart",
			Description: "the broker is stopped and restarted on the same port and store under traffic; the engines ride through it",
			run:         brokerRestart,
		},
		{
			Name:        "actor-kills",
			Description: "each of the engines' actors (ownership, renewer, fencer, contender, primaries, transfer host, a transfer session, overflow, root, jobs) is made to panic under traffic; no call may fail and the holder stays",
			run:         actorKills,
		},
		{
			Name:        "foreign-value",
			Description: "a value no engine wrote is put into the lease key: the holder loses the lease and stops, the standby takes over after a silent lease",
			run:         foreignValue,
		},
		{
			Name:         "tamper",
			Description:  "engine processes hand over by SIGTERM after each cycle tampers with a record (the keyvalue epoch record deleted or rewritten, the lease's epoch record or key deleted, the object bucket recreated with memory storage and a max age): the successor repairs or refuses it, never serves under it silently, and /readyz says so while a member cannot serve",
			Processes:    true,
			KeyValueOnly: true,
			run:          tamper,
		},
		{
			Name:        "discovery",
			Description: "engine processes hosting the module registry hand over by SIGTERM and are SIGKILLed in turn while module instances renew through the Go module client and readers call get_module: no renewed instance may vanish from a read, no register may be applied twice",
			Processes:   true,
			Discovery:   true,
			run:         discoveryScenario,
		},
		{
			Name:        "cluster-node-loss",
			Description: "on a 3-node cluster with R3 buckets each node is lost in turn, the lease stream's leader first: at most one lease period without a serving engine",
			Cluster:     true,
			run:         clusterNodeLoss,
		},
	}
}

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Names lists the scenarios' names.
func Names() []string {
	var out []string
	for _, s := range Scenarios() {
		out = append(out, s.Name)
	}
	return out
}

// onCluster lists the scenarios that may run on a 3-node cluster.
func onCluster() []string {
	var out []string
	for _, s := range Scenarios() {
		if s.OnCluster || s.Cluster {
			out = append(out, s.Name)
		}
	}
	return out
}

// ErrUnknownScenario is returned by Run for a name Scenarios does not list.
var ErrUnknownScenario = errors.New("chaos: unknown scenario")

// Command is the command line that reproduces a run.
func Command(name string, opts Options) string {
	cmd := fmt.Sprintf("abi-engine chaos --scenario %s --duration %s --seed %d", name, opts.Duration, opts.Seed)
	if opts.Lease > 0 && opts.Lease != time.Second {
		cmd += fmt.Sprintf(" --lease %s", opts.Lease)
	}
	if f := opts.Failpoints.Holder; f != "" {
		cmd += fmt.Sprintf(" --failpoints-holder %s", f)
	}
	if f := opts.Failpoints.Others; f != "" {
		cmd += fmt.Sprintf(" --failpoints-others %s", f)
	}
	if opts.ClockRate > 0 && opts.ClockRate != 1.5 {
		cmd += fmt.Sprintf(" --clock-rate %g", opts.ClockRate)
	}
	if opts.KeyValue == KeyValuePostgres {
		cmd += " --keyvalue postgres --postgres-url " + redact.String(opts.PostgresURL)
	}
	if opts.Cluster {
		cmd += " --cluster"
	}
	return cmd
}

// Run runs the scenario called name and returns its report. The error is for a run
// that could not be set up (unknown scenario, no binary, no directory); a scenario that
// broke down halfway returns a report whose Error says why, judged on what was recorded
// until then. With opts.Out set, Run also writes report.json and timeline.svg there.
func Run(ctx context.Context, name string, opts Options) (*Report, error) {
	sc, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownScenario, name, strings.Join(Names(), ", "))
	}
	opts = opts.withDefaults()
	if opts.Lease < time.Second {
		return nil, fmt.Errorf("chaos: lease %s is shorter than the engine's minimum of 1s", opts.Lease)
	}
	if os.Getenv(envEngineConfig) != "" {
		return nil, fmt.Errorf("chaos: this process is an engine process the harness started (%s is set), but it ran the harness instead of the engine: call chaos.EngineProcess first thing in main or TestMain", envEngineConfig)
	}
	if sc.Processes && opts.Binary == "" && opts.Engine == nil {
		return nil, fmt.Errorf("chaos: scenario %q runs engine processes and needs the abi-engine binary (Options.Binary), or an engine constructor (Options.Engine) served by EngineProcess", name)
	}
	if opts.Cluster && !sc.OnCluster && !sc.Cluster {
		return nil, fmt.Errorf("chaos: scenario %q runs on one broker only (its faults are the broker's own or it counts on one server); a 3-node cluster runs %s", name, strings.Join(onCluster(), ", "))
	}
	if sc.KeyValueOnly && opts.Workload != nil {
		return nil, fmt.Errorf("chaos: scenario %q checks the keyvalue traffic's own writes in storage, so it runs only the keyvalue workload, not %s", name, opts.Workload.Name())
	}
	if err := prerequisites(sc, opts); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "abi-chaos-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("chaos: work directory: %w", err)
	}
	defer os.RemoveAll(work)
	logDir := filepath.Join(work, "logs")
	if opts.Out != "" {
		logDir = filepath.Join(opts.Out, "logs")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: log directory: %w", err)
	}

	// Whatever runs now belongs to the caller; whatever runs after the teardown that
	// did not run now is a leak.
	before := goleak.IgnoreCurrent()
	h := newHarness(ctx, sc, opts, work, logDir)
	fmt.Fprintf(opts.Log, "chaos %s: seed %d, lease %s, duration %s\n", name, opts.Seed, opts.Lease, opts.Duration)
	_, runErr := h.secretFile()
	if runErr == nil && opts.KeyValue == KeyValuePostgres {
		runErr = h.setupPostgres()
	}
	if runErr == nil {
		runErr = sc.run(h)
	}
	if runErr != nil {
		h.logf("scenario stopped: %v", runErr)
	}
	h.teardown()
	rep := h.report(runErr)
	rep.Checks = append(rep.Checks, check.NoLeaks(leftoverGoroutines(before), h.procRecords()))
	rep.Finish()
	fmt.Fprintf(opts.Log, "chaos %s: %s\n", name, map[bool]string{true: "passed", false: "FAILED"}[rep.Passed])
	if opts.Out != "" {
		if err := writeFiles(opts.Out, rep, h.history()); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// leftoverGoroutines lists the goroutines goleak finds beyond those running before.
func leftoverGoroutines(before goleak.Option) []string {
	opts := append(leakcheck.Known(), before)
	err := goleak.Find(opts...)
	// nats-server's access-time goroutine runs while any of its stores is open. An atomic
	// batch that reaches a broker as it shuts down opens a store that only the batch's
	// own timer closes, up to the stream's batch timeout later, so the goroutine may
	// outlive the broker by that long: wait that out before calling it a leak.
	for deadline := time.Now().Add(brokerBatchTimeout); err != nil && onlyAccessTime(err) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // polling the runtime's goroutines, bounded by deadline
		err = goleak.Find(opts...)
	}
	if err == nil {
		return nil
	}
	parts := strings.Split(err.Error(), "\n\n")
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" && strings.Contains(p, "oroutine") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = []string{err.Error()}
	}
	return out
}

// brokerBatchTimeout is nats-server's default atomic batch timeout (10 s), and a margin.
const brokerBatchTimeout = 12 * time.Second

// onlyAccessTime reports whether every goroutine goleak found is nats-server's
// access-time goroutine.
func onlyAccessTime(err error) bool {
	n, ats := 0, 0
	for _, p := range strings.Split(err.Error(), "\n\n") {
		if !strings.Contains(p, "oroutine") {
			continue
		}
		n++
		if strings.Contains(p, "nats-server/v2/server/ats.Register") {
			ats++
		}
	}
	return n > 0 && n == ats
}

// writeFiles writes the report, its timeline and the recorded history into dir.
func writeFiles(dir string, rep *Report, hist []bench.Op) error {
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"report.json", rep.WriteJSON},
		{"timeline.svg", rep.WriteSVG},
		{"history.json", func(w io.Writer) error {
			enc := json.NewEncoder(w)
			for _, op := range hist {
				if err := enc.Encode(op); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		file, err := os.Create(filepath.Join(dir, f.name))
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		werr := f.write(file)
		cerr := file.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return fmt.Errorf("chaos: write %s: %w", f.name, err)
		}
	}
	return nil
}

// newRand is the scenario's random source: the seed, mixed with the scenario's name so
// that two scenarios with one seed do not share a schedule.
func newRand(seed int64, name string) *rand.Rand {
	f := fnv.New64a()
	f.Write([]byte(name))
	return rand.New(rand.NewPCG(uint64(seed), f.Sum64()))
}

// trafficConfig is the load every scenario drives: the mixed keyvalue workload, random
// keys shared by all workers, half sets and half gets, a history for the
// linearizability checker.
func trafficConfig(opts Options) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Workload = bench.WorkloadMixed
	cfg.Concurrency = opts.Concurrency
	cfg.Keys = 32
	cfg.PayloadBytes = 32
	cfg.Duration, cfg.Count = 0, 0
	cfg.Timeout = max(3*time.Second, 3*opts.Lease)
	cfg.Seed = opts.Seed
	cfg.KeyPrefix = ""
	cfg.Cleanup = true
	return cfg
}
