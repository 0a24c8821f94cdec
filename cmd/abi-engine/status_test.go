package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStatusWithoutBucketCreatesNothing(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	r := runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "no engine has ever held the lease on "+srv.URL(), "bucket ABI_ENGINE does not exist")

	r = runCLI(t, map[string]string{"ABI_NATS_URL": srv.URL()}, "status", "--json")
	wantCode(t, r, exitOK)
	var got statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if got.BucketExists || !got.Free || got.Holder != nil || got.ChangedAt != nil || got.NATSURL != srv.URL() {
		t.Errorf("status --json without a bucket: %+v", got)
	}

	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(context.Background(), jetstreamstore.DefaultBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("after status, looking up the lease bucket gives %v, want ErrBucketNotFound", err)
	}
}

func TestStatusShowsHolder(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	ctx := context.Background()
	store, err := jetstreamstore.Open(ctx, natstest.Connect(t, srv.URL()), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}

	// The bucket exists, the key was never written.
	r := runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "the lease is free: no engine has held it")

	h := lease.Holder{
		InstanceID: "fedcba9876543210fedcba9876543210",
		Host:       "engine-7f9c",
		PID:        4242,
		Version:    "v1.2.3",
		RolloutID:  "2026.05.01-abc",
		StartedAt:  "2026-05-01T10:00:00Z",
	}
	rev, err := store.Create(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout,
		"held by "+h.String(),
		"host:      engine-7f9c",
		"pid:       4242",
		"version:   v1.2.3",
		"rollout:   2026.05.01-abc",
		"since:     2026-05-01T10:00:00Z",
		"revision:  "+strconv.FormatUint(rev, 10),
		"changed:   ", " ago (")

	r = runCLI(t, nil, "status", "--nats", srv.URL(), "--json")
	wantCode(t, r, exitOK)
	var got statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if got.Holder == nil || *got.Holder != h || got.Free || got.Revision != rev || !got.BucketExists || got.Bucket != "ABI_ENGINE" {
		t.Errorf("status --json: %+v, want holder %+v at revision %d", got, h, rev)
	}
	if got.ChangedAt == nil || got.ChangedSeconds == nil || *got.ChangedSeconds < 0 {
		t.Fatalf("status --json has no change time: %s", r.stdout)
	}
	if at, err := time.Parse(time.RFC3339, *got.ChangedAt); err != nil || time.Since(at) > time.Hour || time.Until(at) > time.Hour {
		t.Errorf("changed_at %q (%v): want the time the holder was written", *got.ChangedAt, err)
	}
	// The holder keeps the six keys of the lease record.
	var raw struct {
		Holder map[string]any `json:"holder"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Holder) != 6 {
		t.Errorf("holder has keys %v, want the six of the lease record", raw.Holder)
	}

	// A released lease is free, and says when it was released.
	if err := store.Delete(ctx, rev); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	// The delete's revision is past the holder's (by the incarnation check's message too).
	_, after, _ := strings.Cut(r.stdout, "the lease is free: released at revision ")
	digits, _, _ := strings.Cut(after, ",")
	if freedAt, err := strconv.ParseUint(digits, 10, 64); err != nil || freedAt <= rev {
		t.Errorf("status of the released lease: %q, want it released at a revision past %d", r.stdout, rev)
	}
	r = runCLI(t, nil, "status", "--nats", srv.URL(), "--json")
	got = statusJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || !got.Free || got.Holder != nil || got.ChangedAt == nil {
		t.Errorf("status --json of a released lease (%v): %s", err, r.stdout)
	}
}

func TestStatusForeignValue(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	store, err := jetstreamstore.Open(context.Background(), natstest.Connect(t, srv.URL()), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(context.Background(), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "held by unknown on unknown host", "not an abi-engine holder record")
}

func TestStatusWithoutBroker(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	srv.Stop()
	r := runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitRuntime)
	wantContains(t, "stderr", r.stderr, "connect to NATS at "+srv.URL())
}

// TestStatusShowsTheEpoch: status prints the epoch record beside the lease (and --json
// carries it), none before any engine settled one, and names a value that is not one.
func TestStatusShowsTheEpoch(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())
	ctx := context.Background()
	store, err := jetstreamstore.Open(ctx, natstest.Connect(t, srv.URL()), jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "epoch:     none")
	r = runCLI(t, nil, "status", "--nats", srv.URL(), "--json")
	if want := `"epoch": null`; !strings.Contains(r.stdout, want) {
		t.Errorf("status --json without an epoch lacks %s:\n%s", want, r.stdout)
	}

	id := "fedcba9876543210fedcba9876543210"
	if _, err := store.Create(ctx, lease.Holder{InstanceID: id}); err != nil {
		t.Fatal(err)
	}
	erev, err := store.WriteEpoch(ctx, lease.EpochRecord{Epoch: 7, InstanceID: id, State: lease.EpochDraining}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "epoch:     7, draining by "+id+" (revision "+strconv.FormatUint(erev, 10)+")")
	r = runCLI(t, nil, "status", "--nats", srv.URL(), "--json")
	var got statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Epoch == nil || *got.Epoch != (epochStatusJSON{Epoch: 7, InstanceID: id, State: "draining", Revision: erev}) || got.EpochError != "" {
		t.Fatalf("status --json epoch = %+v (error %q)", got.Epoch, got.EpochError)
	}

	if _, err := store.PutEpochValue(ctx, []byte("junk")); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "status", "--nats", srv.URL())
	wantCode(t, r, exitOK)
	wantContains(t, "stdout", r.stdout, "epoch:     unreadable", `"junk"`, "not an epoch record")
	r = runCLI(t, nil, "status", "--nats", srv.URL(), "--json")
	got = statusJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Epoch != nil || !strings.Contains(got.EpochError, "not an epoch record") {
		t.Fatalf("status --json of a foreign epoch value (%v): %s", err, r.stdout)
	}
}
