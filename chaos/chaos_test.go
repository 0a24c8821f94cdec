package chaos

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/leakcheck"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/abi-engine/engine/internal/failpoint"
	"go.uber.org/goleak"
)

// binDir holds the abi-engine binary the process scenarios run, built once.
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, append(leakcheck.Known(), goleak.Cleanup(func(int) {
		if binDir != "" {
			os.RemoveAll(binDir)
		}
	}))...)
}

// abiEngine builds cmd/abi-engine once per test binary, with fail points when the test
// has them.
func abiEngine(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binError = os.MkdirTemp("", "abi-chaos-bin-")
		if binError != nil {
			return
		}
		binPath = filepath.Join(binDir, "abi-engine")
		args := []string{"build", "-o", binPath}
		if failpoint.Enabled {
			// The engine processes have the fail points this test binary has.
			args = append(args, "-tags", "failpoints")
		}
		cmd := exec.Command("go", append(args, "github.com/abi-engine/engine/cmd/abi-engine")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			binError = errors.New("go build cmd/abi-engine: " + err.Error() + "\n" + string(out))
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// logWriter sends the harness's progress lines to the test log.
type logWriter struct {
	t  *testing.T
	mu sync.Mutex
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runScenario runs a scenario with the test's log and, when CHAOS_OUT is set, keeps
// its report, timeline and engine logs under CHAOS_OUT/<test name>.
func runScenario(t *testing.T, name string, opts Options) *Report {
	t.Helper()
	if sc, _ := Lookup(name); sc.Processes && opts.Binary == "" {
		opts.Binary = abiEngine(t)
	}
	opts.Log = &logWriter{t: t}
	if dir := os.Getenv("CHAOS_OUT"); dir != "" {
		opts.Out = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(opts.Out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, name, opts)
	if err != nil {
		t.Fatalf("Run(%s): %v", name, err)
	}
	return rep
}

// table is the report as text.
func table(t *testing.T, rep *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := rep.Table(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// requirePassed fails the test with the report when the scenario failed.
func requirePassed(t *testing.T, rep *Report) {
	t.Helper()
	if !rep.Passed {
		t.Fatalf("scenario %s failed; reproduce with: %s\n%s", rep.Scenario, rep.Command, table(t, rep))
	}
	t.Logf("%s passed in %s: %d calls", rep.Scenario, rep.Elapsed.Round(time.Millisecond), rep.Traffic.Ops)
}

// ciSeed is the fixed seed of the CI selection; a failure prints the command that
// replays it.
const ciSeed = 20260101

// everyEngineAnswers are the scenarios in which every engine serves in turn, so each
// must have answered calls: a cycle whose engine answered none judged nothing.
var everyEngineAnswers = map[string]bool{"rolling-deploy": true, "kill-holder": true, "discovery": true}

// TestCISelection runs every scenario's short schedule with a fixed seed; -short leaves
// out the 3-node cluster, whose start alone can take ten seconds.
func TestCISelection(t *testing.T) {
	start := time.Now()
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Cluster && testing.Short() {
				t.Skip("the 3-node cluster scenario is left out under -short")
			}
			skipUnlessRunnable(t, sc)
			rep := runScenario(t, sc.Name, Options{Seed: ciSeed})
			requirePassed(t, rep)
			if everyEngineAnswers[sc.Name] {
				for _, in := range rep.Instances {
					if rep.Traffic.Instances[in.ID] == 0 {
						t.Errorf("%s (%s) answered no call: its cycle had no traffic to judge\n%s", in.Name, report.Short(in.ID), table(t, rep))
					}
				}
			}
		})
	}
	t.Logf("CI selection ran in %s", time.Since(start).Round(time.Second))
}

// skipUnlessRunnable skips a scenario this build cannot run: one that needs fail
// points without -tags failpoints (.ci/run runs it with them).
func skipUnlessRunnable(t *testing.T, sc Scenario) {
	t.Helper()
	if sc.Failpoints && !failpoint.Enabled {
		t.Skipf("%s switches fail points on in its engines: it runs under go test -tags failpoints", sc.Name)
	}
}

func TestLeftoverGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-stop
	}()
	left := leftoverGoroutines(before)
	r := check.NoLeaks(left, nil)
	if r.Passed || !strings.Contains(strings.Join(r.Details, "\n"), "TestLeftoverGoroutines") {
		t.Fatalf("a goroutine started after the snapshot was not reported: %+v", r)
	}
	close(stop)
	<-done
	if left := leftoverGoroutines(before); len(left) != 0 {
		t.Fatalf("goroutines reported after they ended: %v", left)
	}
}

func TestRunRefuses(t *testing.T) {
	ctx := context.Background()
	if _, err := Run(ctx, "no-such-scenario", Options{}); !errors.Is(err, ErrUnknownScenario) ||
		!strings.Contains(err.Error(), "rolling-deploy") {
		t.Fatalf("unknown scenario: %v", err)
	}
	if _, err := Run(ctx, "kill-holder", Options{}); err == nil || !strings.Contains(err.Error(), "Binary") {
		t.Fatalf("process scenario without a binary: %v", err)
	}
	if _, err := Run(ctx, "zombie-write", Options{Binary: "abi-engine", Workload: nameOnly("counters")}); err == nil || !strings.Contains(err.Error(), "only the keyvalue workload, not counters") {
		t.Fatalf("a keyvalue-only scenario with another workload: %v", err)
	}
	if _, err := Run(ctx, "broker-restart", Options{Cluster: true}); err == nil || !strings.Contains(err.Error(), "one broker only") || !strings.Contains(err.Error(), "zombie-write") {
		t.Fatalf("a one-broker scenario on a cluster: %v", err)
	}
	if _, err := Run(ctx, "partition", Options{Lease: 500 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "500ms") {
		t.Fatalf("lease below the minimum: %v", err)
	}
	if _, err := Run(ctx, "partition", Options{KeyValue: KeyValuePostgres}); err == nil || !strings.Contains(err.Error(), "PostgresURL") {
		t.Fatalf("postgres without its URL: %v", err)
	}
	if _, err := Run(ctx, "partition", Options{KeyValue: "redis"}); err == nil || !strings.Contains(err.Error(), `"redis"`) {
		t.Fatalf("an unknown backend: %v", err)
	}
	if !failpoint.Enabled {
		if _, err := Run(ctx, "clock-skew", Options{}); !errors.Is(err, ErrNoFailpoints) {
			t.Fatalf("a fail-point scenario in a build without them: %v", err)
		}
		if _, err := Run(ctx, "partition", Options{Failpoints: Failpoints{Holder: "skip-fencing"}}); !errors.Is(err, ErrNoFailpoints) {
			t.Fatalf("fail points asked of a build without them: %v", err)
		}
	}
}

// nameOnly is a Workload that Run refuses before it makes a call.
type nameOnly string

func (w nameOnly) Name() string { return string(w) }
func (nameOnly) Call(context.Context, *client.Transport, int, *rand.Rand) bench.Op {
	panic("not called")
}
func (nameOnly) Model() *check.Model { return nil }

func TestScenariosAndCommand(t *testing.T) {
	names := Names()
	want := []string{"rolling-deploy", "kill-holder", "pause-holder", "zombie-write", "partition", "clock-skew", "handover", "broker-restart", "actor-kills", "foreign-value", "tamper", "discovery", "cluster-node-loss"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("scenarios %v, want %v", names, want)
	}
	for _, sc := range Scenarios() {
		if sc.Description == "" || sc.run == nil {
			t.Errorf("scenario %s lacks a description or a schedule", sc.Name)
		}
	}
	if got := Command("kill-holder", Options{Duration: time.Minute, Seed: 7}); got != "abi-engine chaos --scenario kill-holder --duration 1m0s --seed 7" {
		t.Fatalf("command %q", got)
	}
	if got := Command("partition", Options{Seed: 1, Lease: 2 * time.Second}); !strings.HasSuffix(got, "--lease 2s") {
		t.Fatalf("command %q", got)
	}
	if got := Command("zombie-write", Options{Seed: 1, Cluster: true}); !strings.HasSuffix(got, " --cluster") {
		t.Fatalf("command %q", got)
	}
	// The same seed draws the same schedule; another scenario or seed another one.
	a, b, c := newRand(7, "kill-holder"), newRand(7, "kill-holder"), newRand(7, "partition")
	x, y, z := a.Int64(), b.Int64(), c.Int64()
	if x != y || x == z {
		t.Fatalf("schedules: %d %d %d", x, y, z)
	}
}

// TestScenario runs one scenario by hand: CHAOS_SCENARIO names it, CHAOS_DURATION
// (a Go duration) and CHAOS_SEED shape it, and CHAOS_OUT keeps its files.
func TestScenario(t *testing.T) {
	name := os.Getenv("CHAOS_SCENARIO")
	if name == "" {
		t.Skip("CHAOS_SCENARIO not set")
	}
	opts := Options{Seed: 1}
	if d := os.Getenv("CHAOS_DURATION"); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil {
			t.Fatal(err)
		}
		opts.Duration = v
	}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		opts.Seed = v
	}
	rep := runScenario(t, name, opts)
	t.Log("\n" + table(t, rep))
	requirePassed(t, rep)
}
