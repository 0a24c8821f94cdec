package jetstream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// A data bucket recreated from outside with memory storage and a TTL under a serving
// store is never adopted: its writes are refused (the bucket lost the epoch record),
// and the probe they start and every adoption refuse the bucket, naming what is wrong.
// An engine that opens such a bucket refuses it too. (Before, the probe adopted the
// epoch again in it and every write it acknowledged vanished with the TTL.)
func TestBadShapeBucketIsRefused(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: "KV_SHAPE"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if err := j.DeleteKeyValue(ctx, "KV_SHAPE"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: "KV_SHAPE", History: 5,
		Storage: js.MemoryStorage, TTL: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "k", []byte("w"), 0); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Set on the recreated bucket = %v, want UNAVAILABLE", err)
	}
	wantShape := func(what string, err error) {
		t.Helper()
		var shape *jsbucket.ShapeError
		if !errors.As(err, &shape) {
			t.Fatalf("%s = %v, want a *jsbucket.ShapeError", what, err)
		}
		for _, part := range []string{"KV_SHAPE", "storage is memory (want file)", "ttl (max age) is 20s (want none)", "history is 5 (want 1)"} {
			if !strings.Contains(err.Error(), part) {
				t.Fatalf("%s = %v, want it to name %q", what, err, part)
			}
		}
	}
	_, err = s.Probe(ctx)
	wantShape("Probe", err)
	wantShape("AdoptEpoch", s.AdoptEpoch(ctx, 2))
	if err := s.Set(ctx, "k", []byte("w"), 0); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Set after the probe = %v, want UNAVAILABLE", err)
	}
	_, err = New(ctx, j, Config{Bucket: "KV_SHAPE"})
	wantShape("New", err)
}
