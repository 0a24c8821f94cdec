package jsepoch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func stream(t *testing.T, ctx context.Context, j js.JetStream) {
	t.Helper()
	if _, err := j.CreateStream(ctx, js.StreamConfig{
		Name: "S", Subjects: []string{"s.>"}, Storage: js.MemoryStorage,
		AllowRollup: true, AllowAtomicPublish: true,
	}); err != nil {
		t.Fatal(err)
	}
}

// write publishes a message under rec's check.
func write(ctx context.Context, j js.JetStream, r *Record, rec epoch.Record) error {
	m := &nats.Msg{Subject: "s.data", Data: []byte("x")}
	r.Check(m, rec)
	_, err := j.PublishMsg(ctx, m)
	return err
}

// A stream deleted and recreated starts its sequences at 1 again, so a stale engine's
// revision can be the new record's: one check subject per epoch keeps it refused.
// (With a single record whose revision writes expect, the stale write committed.)
func TestRecreatedStreamReusesSequences(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream(t, ctx, j)
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, stale); err != nil {
		t.Fatalf("a write under the current epoch: %v", err)
	}
	if err := j.DeleteStream(ctx, "S"); err != nil {
		t.Fatal(err)
	}
	stream(t, ctx, j)
	cur, err := epoch.Adopt(ctx, r, "S", 2)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Rev != stale.Rev {
		t.Fatalf("the recreated stream gave the record revision %d, the stale one had %d: the test needs them equal", cur.Rev, stale.Rev)
	}
	if err := write(ctx, j, r, stale); !jserr.IsConflict(err) {
		t.Fatalf("a write under the stale epoch, same revision = %v, want refused (10071)", err)
	}
	if err := write(ctx, j, r, cur); err != nil {
		t.Fatalf("a write under the current epoch: %v", err)
	}
}

// Each adoption marks the superseded epoch's check subject; a store that adopted none
// expects no record at all.
func TestChecks(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream(t, ctx, j)
	r, err := New(ctx, j, "S", "s.epoch")
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, epoch.Record{}); err != nil {
		t.Fatalf("a write under no epoch while the store has none: %v", err)
	}
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, epoch.Record{}); !jserr.IsConflict(err) {
		t.Fatalf("a write under no epoch while the store has 1 = %v, want refused", err)
	}
	two, err := epoch.Adopt(ctx, r, "S", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, j, r, one); !jserr.IsConflict(err) {
		t.Fatalf("a write under 1 after 2 = %v, want refused", err)
	}
	if got, err := r.ReadEpoch(ctx); err != nil || got != two {
		t.Fatalf("ReadEpoch = %+v, %v; want %+v", got, err, two)
	}
	// An adopter that read 1 before 2 was adopted finds 1's subject marked.
	if _, err := r.WriteEpoch(ctx, 3, one); !errors.Is(err, epoch.ErrMoved) {
		t.Fatalf("WriteEpoch over a superseded record = %v, want ErrMoved", err)
	}
	if _, err := r.WriteEpoch(ctx, 3, epoch.Record{}); !errors.Is(err, epoch.ErrMoved) {
		t.Fatalf("WriteEpoch over none while the store has 2 = %v, want ErrMoved", err)
	}
	if err := write(ctx, j, r, two); err != nil {
		t.Fatalf("a write under 2: %v", err)
	}
}
