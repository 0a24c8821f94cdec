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

// probeUntilRecreated probes until the bucket is recreated: one found gone is
// recreated only after jsbucket.Settle.
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

// TestProbeRecreatesADeletedBucket is issue 10 item 3 at the backend: with the bucket
// deleted every call fails UNAVAILABLE; Probe recreates it with the configured
// settings (reads from the leader included), and the store serves again.
func TestProbeRecreatesADeletedBucket(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: "KV_PROBE"})
	if err != nil {
		t.Fatal(err)
	}
	if recreated, err := s.Probe(ctx); recreated || err != nil {
		t.Fatalf("Probe of a bucket that exists = %v %v", recreated, err)
	}
	if err := j.DeleteKeyValue(ctx, "KV_PROBE"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "k", []byte("v"), 0); !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("Set on a deleted bucket = %v, want UNAVAILABLE", err)
	}
	probeUntilRecreated(t, ctx, s)
	st, err := j.Stream(ctx, "KV_KV_PROBE")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.AllowDirect || !c.AllowMsgTTL || c.MaxMsgsPerSubject != 1 {
		t.Fatalf("recreated with direct gets %v, per-key TTLs %v, history %d", c.AllowDirect, c.AllowMsgTTL, c.MaxMsgsPerSubject)
	}
	if err := s.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatalf("Set after the recreation: %v", err)
	}
	if v, ok, err := s.Get(ctx, "k"); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get after the recreation = %q %v %v", v, ok, err)
	}
}
