package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/internal/testwait"
)

// cliProcess is an abi-engine command other than run as a child process.
type cliProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *testproc.Output
	exited         chan struct{}
	code           int
}

func startCLI(t *testing.T, args ...string) *cliProcess {
	t.Helper()
	dir := t.TempDir()
	p := &cliProcess{stdout: &testproc.Output{}, stderr: &testproc.Output{}, exited: make(chan struct{})}
	p.cmd = exec.Command(buildBinary(t), args...)
	p.cmd.Dir = dir
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("abi-engine %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.stdout, p.stderr)
		}
	})
	return p
}

// waitOut waits for a line of standard output containing every one of subs, while the
// process runs.
func (p *cliProcess) waitOut(t *testing.T, what string, subs ...string) string {
	t.Helper()
	var found string
	testwait.For(t, 60*time.Second, what, func() bool {
		select {
		case <-p.exited:
			t.Fatalf("%s: the command exited %d\nstdout:\n%s\nstderr:\n%s", what, p.code, p.stdout, p.stderr)
		default:
		}
		for _, l := range strings.Split(p.stdout.String(), "\n") {
			if containsAll(l, subs...) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestProcessStatusWatchFollowsAnAccountFromItsFirstEngine: status --watch (and
// --json) started on an account where no engine ever ran waits for one, saying so,
// instead of exiting; then it prints the engine's take with the epoch it settles (not
// "none"), an eviction as a line of its own, the standby's take, with the holder in the
// last column so a rollout id misaligns nothing.
func TestProcessStatusWatchFollowsAnAccountFromItsFirstEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := natstest.Start(t)
	table := startCLI(t, "status", "--watch", "--nats", srv.URL())
	lines := startCLI(t, "status", "--watch", "--json", "--nats", srv.URL())
	for _, p := range []*cliProcess{table, lines} {
		testwait.For(t, 60*time.Second, "status --watch says it waits for an engine", func() bool {
			select {
			case <-p.exited:
				t.Fatalf("status --watch on an account without the bucket exited %d, want it to wait:\n%s", p.code, p.stderr)
			default:
			}
			return strings.Contains(p.stderr.String(), "bucket ABI_ENGINE does not exist): waiting for one")
		})
	}

	rollout := "2026.05.01-a-rollout-id-longer-than-the-old-holder-column"
	a := startEngine(t, sharedEngineConfig(srv.URL()), "ABI_ROLLOUT_ID="+rollout)
	a.waitReady(t)
	idA := a.status(t).InstanceID
	// The watch may find the bucket before or after A's take: either its first line
	// (current) or a line of its own (acquired) has it, with epoch 1 on the same line or
	// on the next.
	table.waitOut(t, "A's take", idA+" (rollout "+rollout+")")
	table.waitOut(t, "A's epoch", " 1 serving ", idA)

	b := startEngine(t, sharedEngineConfig(srv.URL()), "ABI_ROLLOUT_ID=r2")
	b.waitReady(t)
	// A wedged holder, as evict is for: stopped, it cannot take the lease back before
	// the standby does.
	a.signal(t, syscall.SIGSTOP)
	r := runCLI(t, nil, "evict", "--force", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	table.waitOut(t, "the eviction", "evicted", "1 serving", " free")
	idB := b.status(t).InstanceID
	table.waitOut(t, "B's take", "acquired", idB+" (rollout r2)")
	table.waitOut(t, "B's epoch", "new-epoch", " 2 serving ", idB)

	out := table.stdout.String()
	if strings.Contains(out, "released") {
		t.Errorf("the eviction was printed as a release:\n%s", out)
	}
	all := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(all[0], "TIME") {
		t.Fatalf("no header line:\n%s", out)
	}
	revAt, epochAt := strings.Index(all[0], "REVISION"), strings.Index(all[0], "EPOCH")
	settled := false
	for _, l := range all[1:] {
		f := strings.Fields(l)
		if len(l) < epochAt || len(f) < 6 || strings.IndexFunc(f[2], func(r rune) bool { return r < '0' || r > '9' }) >= 0 || !strings.HasPrefix(l[revAt:], f[2]+" ") {
			t.Errorf("line %q: the revision is not a number under REVISION (column %d)", l, revAt)
			continue
		}
		// Once an engine has settled an epoch, every line shows one (the record stays).
		none := strings.HasPrefix(l[epochAt:], "none ")
		if settled && none {
			t.Errorf("line %q: EPOCH none after an engine settled epoch 1", l)
		}
		settled = settled || !none
	}

	lines.waitOut(t, "B's epoch as JSON", `"event":"new-epoch"`, `"epoch":2`)
	var events []string
	for _, l := range strings.Split(strings.TrimSpace(lines.stdout.String()), "\n") {
		var got watchJSON
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("status --watch --json printed a line that is not JSON: %q (%v)", l, err)
		}
		events = append(events, got.Event)
		if got.Event == "evicted" && (got.Epoch == nil || got.Epoch.InstanceID != idA || !got.Free) {
			t.Errorf("the eviction's JSON line: %+v, want a free lease and A's epoch", got)
		}
	}
	got := strings.Join(events, " ")
	if want := "evicted acquired new-epoch"; !strings.HasPrefix(got, "current ") || !strings.HasSuffix(got, " "+want) {
		t.Errorf("status --watch --json events %q, want current, A's take, then %q", got, want)
	}
}
