package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// cli runs an abi-engine command (not run) against url and returns it.
func cli(t *testing.T, name, url string, args ...string) *proc {
	t.Helper()
	return startArgs(t, name, t.TempDir(), 0, nil, append(args, "--nats", url)...)
}

// TestStepDownUnderTrafficHasNoFailedCall is done-when "step-down under traffic": A
// (v1) serves, B (v2) stands by; abi-engine step-down (a request, not a signal) hands
// over under eight set-then-get loops with zero failed calls; A exits 0, B serves, every
// worker was answered by A and then by B; status --watch printed the hand-off and B's
// take as lines of their own.
func TestStepDownUnderTrafficHasNoFailedCall(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: 5, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Drain: 5, HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	idA, idB := a.instanceID(), b.instanceID()
	watch := cli(t, "status --watch", srv.URL(), "status", "--watch")
	watch.waitLog(idA, 10*time.Second)

	tf := startTraffic(t, srv.URL(), 8)
	tf.waitAnswers(t, idA, 200, 20*time.Second)
	sd := cli(t, "step-down", srv.URL(), "step-down")
	if code := sd.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("step-down exited %d, want 0:\n%s", code, sd.out.String())
	}
	if out := sd.out.String(); !strings.Contains(out, "handed over: "+idB) {
		t.Fatalf("step-down does not name B as the new holder:\n%s", out)
	}
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d after step-down, want 0", code)
	}
	b.waitState("serving", 10*time.Second)
	tf.waitAnswers(t, idB, 200, 20*time.Second)
	tf.halt()
	if len(tf.fails) > 0 {
		t.Fatalf("%d failed calls, first: %s", len(tf.fails), tf.fails[0])
	}
	if len(tf.bad) > 0 {
		t.Fatalf("%d reads did not return what was written, first: %s", len(tf.bad), tf.bad[0])
	}
	tf.wantHandedOver(t, idA, idB)
	watch.waitLog("handed-off", 5*time.Second)
	watch.waitLog(idB+" (rollout v2)", 5*time.Second)
	if n := strings.Count(watch.out.String(), "\n"); n > 8 {
		t.Errorf("status --watch printed %d lines for one handover (renewals are not changes):\n%s", n, watch.out.String())
	}
	t.Logf("step-down: %d calls, longest gap without a reply %s", tf.ok.Load(), tf.maxGap)
}

// TestStepDownToARolloutLeavesTheOthersWaiting is done-when "step-down --to v3 with
// standbys v2 and v3": v2 has waited longer, but --to v3 hands to v3, while v2 keeps
// standing by. Before, --to v9 (no such standby) exits 3 and changes nothing.
func TestStepDownToARolloutLeavesTheOthersWaiting(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: 1, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	v2 := start(t, "v2", engineConfig{NATSURL: srv.URL(), Rollout: "v2", HTTPPort: testproc.FreePort(t)})
	v2.waitState("standby", 20*time.Second)
	v3 := start(t, "v3", engineConfig{NATSURL: srv.URL(), Rollout: "v3", HTTPPort: testproc.FreePort(t)})
	v3.waitState("standby", 20*time.Second)
	idA, id3 := a.instanceID(), v3.instanceID()
	kv := leaseKV(t, srv.URL())

	none := cli(t, "step-down --to v9", srv.URL(), "step-down", "--to", "v9")
	if code := none.exitCode(30 * time.Second); code != 3 {
		t.Fatalf("step-down --to v9 exited %d, want 3:\n%s", code, none.out.String())
	}
	if out := none.out.String(); !strings.Contains(out, "v9") || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("step-down --to v9 does not say why:\n%s", out)
	}
	if h := holderOf(t, kv); h != idA {
		t.Fatalf("after a refused step-down the holder is %q, want A", h)
	}
	a.waitState("serving", time.Second)

	sd := cli(t, "step-down --to v3", srv.URL(), "step-down", "--to", "v3")
	if code := sd.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("step-down --to v3 exited %d, want 0:\n%s", code, sd.out.String())
	}
	v3.waitState("serving", 10*time.Second)
	if h := holderOf(t, kv); h != id3 {
		t.Fatalf("holder %q, want v3 (%s)", h, id3)
	}
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d, want 0", code)
	}
	// v2 goes on standing by: through a lease of v3's renewals and more.
	renewed := nextRenewal(t, kv, 10*time.Second)
	for nextRenewal(t, kv, 10*time.Second) < renewed+4 {
	}
	v2.waitState("standby", time.Second)
	if code, _, err := v2.get("/readyz"); err != nil || code != 200 {
		t.Fatalf("v2 /readyz %d %v, want 200 while it stands by", code, err)
	}
}

// TestHotStandbyTakesOverOneLeaseAfterAKill is done-when "hot standby": B of A's own
// rollout with nats.engine.standby: hot waits instead of exiting 3, is ready while it
// serves nothing, and after SIGKILL of A serves one lease later, with no boot (it logs
// "abi-engine loaded" once); every call sent after the takeover is answered.
func TestHotStandbyTakesOverOneLeaseAfterAKill(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v1", HTTPPort: testproc.FreePort(t)}, "ABI_ENGINE_STANDBY=hot")
	b.waitState("standby", 20*time.Second)
	b.waitHTTP("/readyz", 200, 5*time.Second)
	idB := b.instanceID()

	a.signal(syscall.SIGKILL)
	a.exitCode(10 * time.Second)
	killed := time.Now()
	b.waitState("serving", 20*time.Second)
	took := time.Since(killed)
	if took < 1800*time.Millisecond { // 0.9 of the 2 s lease
		t.Fatalf("the hot standby served %s after the kill, before one lease period", took)
	}
	if n := strings.Count(b.out.String(), `"abi-engine loaded"`); n != 1 {
		t.Fatalf("B loaded %d times, want once (a takeover with no boot)", n)
	}
	tf := startTraffic(t, srv.URL(), 4)
	tf.waitAnswers(t, idB, 100, 20*time.Second)
	tf.halt()
	if len(tf.fails) > 0 || len(tf.bad) > 0 {
		t.Fatalf("after the takeover: %d failed, %d wrong reads; first: %v %v", len(tf.fails), len(tf.bad), tf.fails, tf.bad)
	}
	t.Logf("hot standby served %s after the kill", took)
}

// TestStepDownStayKeepsTheProcessAsAStandby: with --stay the old engine hands over and
// its process, which never exits, comes back (a new instance id: it started again) as a
// standby of the successor, ready.
func TestStepDownStayKeepsTheProcessAsAStandby(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: 1, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	idA := a.instanceID()

	sd := cli(t, "step-down --stay", srv.URL(), "step-down", "--stay")
	if code := sd.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("step-down --stay exited %d:\n%s", code, sd.out.String())
	}
	b.waitState("serving", 10*time.Second)
	a.waitLog("stay_as_standby", 20*time.Second)
	a.waitState("standby", 30*time.Second)
	if id := a.instanceID(); id == idA {
		t.Fatalf("the process came back with the same instance id %s: it did not start again", id)
	}
	select {
	case <-a.exited:
		t.Fatalf("A exited: %v", a.waitErr)
	default:
	}
	a.waitHTTP("/readyz", 200, 5*time.Second)
}
