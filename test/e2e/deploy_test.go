package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRollingDeployUnderTraffic is done-when 1 of the engine issue: A (rollout v1)
// serves, B (v2) stands by and is ready, SIGTERM to A hands over under eight
// set-then-get loops with zero failed calls, every read returning what was written,
// and replies switching from A to B.
func TestRollingDeployUnderTraffic(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: 5, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Drain: 5, HTTPPort: testproc.FreePort(t)})
	b.waitHTTP("/readyz", 200, 20*time.Second)
	b.waitState("standby", 5*time.Second)
	idA, idB := a.instanceID(), b.instanceID()

	tf := startTraffic(t, srv.URL(), 8)
	tf.waitAnswers(t, idA, 200, 20*time.Second)
	a.signal(syscall.SIGTERM)
	if code := a.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("A exited %d after SIGTERM, want 0", code)
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
	t.Logf("handover: %d calls, longest gap without a reply %s", tf.ok.Load(), tf.maxGap)
}

// TestSecondEngineExitsThree is done-when 2: a second engine without a new rollout
// exits 3 within about lease/2, naming the first; the first keeps serving.
func TestSecondEngineExitsThree(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	startedAt := time.Now()
	b := start(t, "B", engineConfig{NATSURL: srv.URL()})
	if code := b.exitCode(20 * time.Second); code != 3 {
		t.Fatalf("second engine exited %d, want 3", code)
	}
	took := time.Since(startedAt)
	out := b.out.String()
	for _, want := range []string{"another engine already serves", a.instanceID(), "pid ", "version ", "rollout none", "since ", "ABI_ROLLOUT_ID"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// lease/2 is 1 s here; a process start and a broker connection come on top.
	// A live holder renews every lease/4, so the refusal comes after one renewal: far
	// less than the full lease a dead holder would need.
	if took > 2*time.Second {
		t.Errorf("refused after %s: it waited like for a dead holder", took)
	}
	if code, _, err := a.get("/readyz"); err != nil || code != 200 {
		t.Fatalf("the first engine stopped serving: %d %v", code, err)
	}
	a.waitState("serving", time.Second)
}

// TestTakeoverAfterKill is done-when 3: after SIGKILL of the holder a replacement
// serves after one lease period, and every request sent after that is answered.
func TestTakeoverAfterKill(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	a.signal(syscall.SIGKILL)
	a.exitCode(10 * time.Second)
	killed := time.Now()
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	b.waitState("serving", 20*time.Second)
	if took := time.Since(killed); took < 1800*time.Millisecond { // 0.9 of the 2 s lease
		t.Fatalf("replacement served %s after the kill, before one lease period", took)
	}
	tf := startTraffic(t, srv.URL(), 4)
	tf.waitAnswers(t, b.instanceID(), 100, 20*time.Second)
	tf.halt()
	if len(tf.fails) > 0 || len(tf.bad) > 0 {
		t.Fatalf("after the takeover: %d failed, %d wrong reads; first: %v %v", len(tf.fails), len(tf.bad), tf.fails, tf.bad)
	}
}

// TestLocalBackendWithRolloutExitsTwo is done-when 5: a rollout with a local backend
// exits 2 before creating the lease bucket, naming each service and where its data is.
func TestLocalBackendWithRolloutExitsTwo(t *testing.T) {
	srv := natstest.Start(t)
	p := start(t, "local", engineConfig{NATSURL: srv.URL(), Rollout: "v2", KeyValue: "bbolt", Objects: "fs"})
	if code := p.exitCode(20 * time.Second); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	out := p.out.String()
	for _, want := range []string{"v2", "keyvalue", "file at data/kv.db", "object_storage", "files under data/objects"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(context.Background(), "ABI_ENGINE"); err == nil {
		t.Fatal("the refused engine created the lease bucket")
	}
}
