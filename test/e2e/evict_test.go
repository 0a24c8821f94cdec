package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
)

var (
	fpBinaryOnce sync.Once
	fpBinary     string
	fpBinaryErr  error
)

// failpointBinary builds abi-engine with fail points (once), beside the harness's
// binary, whose directory TestMain removes.
func failpointBinary(t *testing.T) string {
	t.Helper()
	fpBinaryOnce.Do(func() {
		fpBinary = filepath.Join(filepath.Dir(binary), "abi-engine-failpoints")
		build := exec.Command("go", "build", "-tags", "failpoints", "-o", fpBinary, "github.com/abi-engine/engine/cmd/abi-engine")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		fpBinaryErr = build.Run()
	})
	if fpBinaryErr != nil {
		t.Fatalf("building abi-engine with fail points: %v", fpBinaryErr)
	}
	return fpBinary
}

// TestEvictForceOnAStoppedHolder is done-when "evict --force on a SIGSTOPped holder":
// A stalls a write after its lease check (fail point stall-before-write) and is
// SIGSTOPped; evict --force deletes its lease at the revision it read, and the standby
// serves at once, not a lease of silence later. Resumed, A's stalled write goes out and
// storage refuses it (UNAVAILABLE, retryable: the epoch moved), and A exits 1 as lost.
func TestEvictForceOnAStoppedHolder(t *testing.T) {
	fp := failpointBinary(t)
	srv := natstest.Start(t)
	const lease = 4 * time.Second
	const stall = 3 * lease / 2
	aCfg := engineConfig{NATSURL: srv.URL(), Rollout: "v1", Lease: lease.Seconds(), HTTPPort: testproc.FreePort(t)}
	dir := t.TempDir()
	path := filepath.Join(dir, "abi-engine.yaml")
	if err := os.WriteFile(path, []byte(aCfg.yaml()), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := binary
	binary = fp
	a := startArgs(t, "A", dir, aCfg.HTTPPort, []string{"ABI_FAILPOINTS=stall-before-write=key:zombie:" + stall.String()}, "run", "--config", path)
	binary = saved
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Lease: lease.Seconds(), HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	idB := b.instanceID()

	once, err := client.NewTransport(natstest.Connect(t, srv.URL()), client.WithRetryPolicy(client.RetryPolicy{}))
	if err != nil {
		t.Fatal(err)
	}
	zombie := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), stall+5*lease)
		defer cancel()
		body := protocol.KVSetRequest{Key: "zombie", Value: []byte("from A")}
		_, err := call(ctx, once, "set", body, nil)
		zombie <- err
	}()
	a.waitLog("stalling a call on key", 10*time.Second)
	stalledAt := time.Now()
	a.signal(syscall.SIGSTOP)
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })

	ev := cli(t, "evict --force", srv.URL(), "evict", "--force")
	if code := ev.exitCode(20 * time.Second); code != 0 {
		t.Fatalf("evict --force exited %d:\n%s", code, ev.out.String())
	}
	evicted := time.Now()
	b.waitState("serving", lease)
	if took := time.Since(evicted); took >= lease {
		t.Fatalf("B served %s after the eviction: it waited a lease of silence", took)
	}
	// B writes the key too. A's queue subscription is still at the broker while it is
	// stopped, so a call may be routed to it and wait there: write until B answers one.
	tr, err := client.NewTransport(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(context.Background(), lease/4)
		inst, err := call(actx, tr, "set", protocol.KVSetRequest{Key: "zombie", Value: []byte("from B")}, nil)
		cancel()
		if err == nil && inst == idB {
			break
		}
		if attempt == 40 {
			t.Fatalf("B answered no write of the key in %d attempts (last: %q, %v)", attempt, inst, err)
		}
	}
	kv := client.NewKeyValue(tr)
	ctx := ctxFor(t, 20*time.Second)

	// The stall is over while A is stopped: its write goes out the moment it runs.
	time.Sleep(time.Until(stalledAt.Add(stall)))
	a.signal(syscall.SIGCONT)
	err = <-zombie
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.Unavailable || !perr.Retryable {
		t.Fatalf("A's stalled write: %v, want UNAVAILABLE, retryable (refused by storage)", err)
	}
	if code := a.exitCode(5 * lease); code != 1 {
		t.Fatalf("A exited %d after SIGCONT, want 1 (lost)", code)
	}
	if out := a.out.String(); !strings.Contains(out, "another engine took the engine lease: "+idB) {
		t.Fatalf("A did not end as lost to B, named:\n%s", out)
	}
	got, found, err := kv.Get(ctx, "zombie")
	if err != nil || !found || string(got) != "from B" {
		t.Fatalf("the key holds %q (found %v, %v), want B's write: A's must have been refused", got, found, err)
	}
}
