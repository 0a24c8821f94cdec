package jetstream

import (
	"context"
	"errors"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

func probeUntilRecreated(t *testing.T, ctx context.Context, s *Store) {
	t.Helper()
	for {
		recreated, err := s.Probe(ctx)
		if recreated && err == nil {
			return
		}
		if !errors.Is(err, jsbucket.ErrSettling) {
			t.Fatalf("Probe of a deleted bucket = %v %v, want it recreated", recreated, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProbeRecreatesADeletedBucket: as for keyvalue, Probe recreates a deleted object
// store with the configured settings and the store serves again.
func TestProbeRecreatesADeletedBucket(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: "OBJ_PROBE"})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.DeleteObjectStore(ctx, "OBJ_PROBE"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "p", "k", []byte("v")); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("PutObject on a deleted bucket = %v, want UNAVAILABLE", err)
	}
	probeUntilRecreated(t, ctx, s)
	st, err := j.Stream(ctx, "OBJ_OBJ_PROBE")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.AllowDirect || c.Description != "abi-engine object_storage service" {
		t.Fatalf("recreated with direct gets %v, description %q", c.AllowDirect, c.Description)
	}
	if err := s.PutObject(ctx, "p", "k", []byte("v")); err != nil {
		t.Fatalf("PutObject after the recreation: %v", err)
	}
	if v, err := s.GetObject(ctx, "p", "k"); err != nil || string(v) != "v" {
		t.Fatalf("GetObject after the recreation = %q %v", v, err)
	}
}
