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
)

// An object bucket recreated from outside with memory storage and a max age is
// refused by the probe, by every adoption and at open, naming each wrong setting:
// nothing is adopted in it, so no put is acknowledged into it. (Before, the probe gave
// the bucket atomic publish back and adopted the held epoch in it, and every put after
// that was acknowledged into storage that loses it.)
func TestBadShapeBucketIsRefused(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: "OBJ_SHAPE"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := j.DeleteObjectStore(ctx, "OBJ_SHAPE"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateObjectStore(ctx, js.ObjectStoreConfig{Bucket: "OBJ_SHAPE", Storage: js.MemoryStorage, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "p", "k", []byte("v")); err == nil {
		t.Fatal("a put into the recreated bucket was acknowledged")
	}
	wantShape := func(what string, err error) {
		t.Helper()
		var shape *jsbucket.ShapeError
		if !errors.As(err, &shape) {
			t.Fatalf("%s = %v, want a *jsbucket.ShapeError", what, err)
		}
		for _, part := range []string{"OBJ_SHAPE", "storage is memory (want file)", "ttl (max age) is 1m0s (want none)"} {
			if !strings.Contains(err.Error(), part) {
				t.Fatalf("%s = %v, want it to name %q", what, err, part)
			}
		}
	}
	_, err = s.Probe(ctx)
	wantShape("Probe", err)
	wantShape("AdoptEpoch", s.AdoptEpoch(ctx, 2))
	if err := s.PutObject(ctx, "p", "k", []byte("v")); err == nil {
		t.Fatal("a put after the probe was acknowledged")
	}
	_, err = New(ctx, j, Config{Bucket: "OBJ_SHAPE"})
	wantShape("New", err)
}
