package main

import (
	"context"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
)

// TestStepDownAndEvictOfAHolderThatIsGone: the lease names an engine that no longer
// runs. step-down (and evict without --force) exits 1 naming evict --force, and changes
// nothing; evict --force deletes the lease at the revision it read; on a free lease
// step-down and evict --force exit 1.
func TestStepDownAndEvictOfAHolderThatIsGone(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	ctx := context.Background()
	store, err := jetstreamstore.Open(ctx, natstest.Connect(t, srv.URL()), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gone := lease.Holder{InstanceID: "0123456789abcdef0123456789abcdef", Host: "h", PID: 7, Version: "1", RolloutID: "v1", StartedAt: "2026-12-01T00:00:00Z"}
	rev, err := store.Create(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"step-down"}, {"evict"}} {
		r := runCLI(t, nil, append(args, "--nats", srv.URL())...)
		wantCode(t, r, exitRuntime)
		wantContains(t, "stderr", r.stderr, gone.InstanceID, "evict --force")
		if rec, err := store.Read(ctx); err != nil || rec.Revision != rev {
			t.Fatalf("%v changed the lease: %v, %v", args, rec, err)
		}
	}
	r := runCLI(t, nil, "evict", "--force", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "evicted "+gone.InstanceID, "revision")
	if rec, err := store.Read(ctx); err != nil || !rec.Free() {
		t.Fatalf("after evict --force the lease is %v, %v; want free", rec, err)
	}
	for _, args := range [][]string{{"step-down"}, {"evict", "--force"}} {
		r := runCLI(t, nil, append(args, "--nats", srv.URL())...)
		wantCode(t, r, exitRuntime)
	}
	r = runCLI(t, nil, "step-down", "--timeout", "0s", "--nats", srv.URL())
	wantCode(t, r, exitUsage)
}
