package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRestartKeepsPortAndStore(t *testing.T) {
	s := Start(t)
	url := s.URL()
	nc := Connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "T"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if s.URL() != url {
		t.Fatalf("URL after restart = %s, want %s", s.URL(), url)
	}
	// The client reconnects on its own; the key written before the restart survives.
	e, err := kv.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if string(e.Value()) != "v" {
		t.Fatalf("value after restart = %q, want v", e.Value())
	}
	s.Stop()
	s.Stop() // idempotent
	if s.Running() {
		t.Fatal("Running after Stop")
	}
}

func TestMaxPayload(t *testing.T) {
	s := Start(t, WithMaxPayload(2048), WithoutJetStream())
	nc := Connect(t, s.URL())
	if got := nc.MaxPayload(); got != 2048 {
		t.Fatalf("MaxPayload = %d, want 2048", got)
	}
}

func TestClusterReplicatedBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster election takes seconds")
	}
	c := StartCluster(t)
	nc := Connect(t, c.URLs())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "R3", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if i := c.StreamLeader("KV_R3"); i < 0 {
		t.Fatal("no node leads KV_R3")
	}
}
