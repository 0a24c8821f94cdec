package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
)

// leaseView is the part of /status the epoch tests read.
type leaseView struct {
	State string `json:"state"`
	Lease struct {
		Epoch uint64 `json:"epoch"`
	} `json:"lease"`
}

// view reads /status; ok is false while the process does not answer it.
func (p *proc) view() (leaseView, bool) {
	_, body, err := p.get("/status")
	var v leaseView
	if err != nil || json.Unmarshal([]byte(body), &v) != nil {
		return leaseView{}, false
	}
	return v, true
}

// watchEpoch polls /status until until(view) holds, checking every view it reads with
// check, which names a view that must not be; it fails after within.
func (p *proc) watchEpoch(within time.Duration, what string, check func(leaseView) string, until func(leaseView) bool) leaseView {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		v, ok := p.view()
		if ok {
			if bad := check(v); bad != "" {
				p.t.Fatalf("%s: /status says %s %d: %s", p.name, v.State, v.Lease.Epoch, bad)
			}
			if until(v) {
				return v
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: %s not seen within %s (last %+v)", p.name, what, within, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRollingDeployKeepsTheEpochThroughTheDrain is issue 12's done-when 3 in real
// processes: a clean rolling deploy under traffic, with a transfer in progress on the
// old engine. The successor serves at once under the old engine's epoch, keeps it for
// as long as the old engine drains (its writes, the transfer's, must still commit), and
// moves by one right after the old engine's drain is over, long before its own
// drain_seconds; no call fails.
func TestRollingDeployKeepsTheEpochThroughTheDrain(t *testing.T) {
	srv := natstest.Start(t)
	const drainA = 3.0
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: drainA, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	// B's own drain_seconds is far longer than A's drain: its bump must come from A's
	// mark, not from its own clock.
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Drain: 60, HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	idA, idB := a.instanceID(), b.instanceID()
	va, _ := a.view()
	n := va.Lease.Epoch
	if n == 0 {
		t.Fatalf("A serves under epoch 0")
	}
	if vb, _ := b.view(); vb.Lease.Epoch != 0 {
		t.Fatalf("the standby holds epoch %d, want none", vb.Lease.Epoch)
	}

	tr, err := client.NewTransport(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	first, second := bytes.Repeat([]byte("a"), 1024), bytes.Repeat([]byte("b"), 700)
	inflight := openPut(t, tr, "epoch-inflight")
	stuck := openPut(t, tr, "epoch-stuck") // holds A draining until its deadline
	if inflight.owner != idA || stuck.owner != idA {
		t.Fatalf("opens answered by %s and %s, want A", inflight.owner, stuck.owner)
	}
	if err := inflight.write(first); err != nil {
		t.Fatal(err)
	}
	if err := stuck.write(first); err != nil {
		t.Fatal(err)
	}
	tf := startTraffic(t, srv.URL(), 4)
	tf.waitAnswers(t, idA, 100, 20*time.Second)

	a.signal(syscall.SIGTERM)
	sigterm := time.Now()
	notBumped := func(v leaseView) string {
		if v.State == "serving" && v.Lease.Epoch != n {
			return "the epoch moved while A still drains"
		}
		return ""
	}
	b.watchEpoch(10*time.Second, "B serving", notBumped, func(v leaseView) bool { return v.State == "serving" })
	// The transfer in progress completes on A, during its drain, and commits.
	if err := inflight.write(second); err != nil {
		t.Fatalf("the transfer in progress failed on A: %v", err)
	}
	if err := inflight.start(); err != nil {
		t.Fatalf("the transfer in progress could not complete on A: %v", err)
	}
	b.watchEpoch(time.Second, "B under A's epoch", notBumped, func(v leaseView) bool { return v.Lease.Epoch == n })
	got, err := client.NewObjectStorage(tr).GetObject(ctxFor(t, 10*time.Second), "e2e", "epoch-inflight")
	if err != nil || !bytes.Equal(got, append(append([]byte{}, first...), second...)) {
		t.Fatalf("the object A wrote during its drain: %d bytes, %v", len(got), err)
	}
	// A is still draining (the stuck transfer): B keeps epoch n until A's drain is over.
	for i := 0; i < 10; i++ {
		select {
		case <-a.exited:
			t.Fatalf("A exited %s after SIGTERM, before its %gs drain deadline", time.Since(sigterm), drainA)
		default:
		}
		b.watchEpoch(time.Second, "B's status", notBumped, func(leaseView) bool { return true })
		time.Sleep(50 * time.Millisecond)
	}
	if code := a.exitCode(time.Duration(drainA*float64(time.Second)) + 20*time.Second); code != 0 {
		t.Fatalf("A exited %d", code)
	}
	v := b.watchEpoch(5*time.Second, "B under the next epoch", func(v leaseView) string {
		if v.Lease.Epoch != n && v.Lease.Epoch != n+1 {
			return "want n or n+1"
		}
		return ""
	}, func(v leaseView) bool { return v.Lease.Epoch == n+1 })
	if took := time.Since(sigterm); took > 30*time.Second {
		t.Fatalf("B moved to epoch %d %s after SIGTERM: by its own drain time, not A's mark", v.Lease.Epoch, took)
	}
	tf.waitAnswers(t, idB, 100, 20*time.Second)
	tf.halt()
	if len(tf.fails) > 0 || len(tf.bad) > 0 {
		t.Fatalf("%d failed calls, %d wrong reads; first: %v %v", len(tf.fails), len(tf.bad), tf.fails, tf.bad)
	}
	b.waitLog(`"deferred":true`, time.Second)
	if !strings.Contains(b.out.String(), `"old_epoch":`) {
		t.Fatalf("B's bump log line names no old epoch")
	}
}

// TestTakeoverAfterKillBumpsTheEpochBeforeServing is issue 12's takeover in real
// processes: after SIGKILL of the holder, the replacement moves the epoch by one before
// it serves: no /status that says serving carries the old epoch, and abi-engine
// status shows the new one, the replacement's.
func TestTakeoverAfterKillBumpsTheEpochBeforeServing(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	va, _ := a.view()
	n := va.Lease.Epoch
	a.signal(syscall.SIGKILL)
	a.exitCode(10 * time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	b.watchEpoch(20*time.Second, "B serving under the next epoch", func(v leaseView) string {
		if v.State == "serving" && v.Lease.Epoch != n+1 {
			return "serving, but not under the next epoch"
		}
		return ""
	}, func(v leaseView) bool { return v.State == "serving" })
	idB := b.instanceID()
	st := startArgs(t, "status", t.TempDir(), 0, nil, "status", "--nats", srv.URL(), "--json")
	if code := st.exitCode(20 * time.Second); code != 0 {
		t.Fatalf("abi-engine status exited %d", code)
	}
	var out struct {
		Epoch struct {
			Epoch      uint64 `json:"epoch"`
			InstanceID string `json:"instance_id"`
			State      string `json:"state"`
		} `json:"epoch"`
	}
	if err := json.Unmarshal([]byte(st.out.String()), &out); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.out.String())
	}
	if out.Epoch.Epoch != n+1 || out.Epoch.InstanceID != idB || out.Epoch.State != "serving" {
		t.Fatalf("abi-engine status shows epoch %+v, want %d of B, serving", out.Epoch, n+1)
	}
	b.waitLog(`"deferred":false`, time.Second)
}
