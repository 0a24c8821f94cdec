package broker

import (
	"context"
	"github.com/abi-engine/engine/internal/testwait"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestServerRestartKeepsPortAndStore(t *testing.T) {
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !s.Running() || !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") || !strings.HasSuffix(s.URL(), s.Addr()) {
		t.Fatalf("running %v url %s addr %s", s.Running(), s.URL(), s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js := connect(t, s.URL())
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "T"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	url := s.URL()
	s.Stop()
	s.Stop() // stopping a stopped server does nothing
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil { // starting a running one does nothing
		t.Fatal(err)
	}
	if s.URL() != url {
		t.Fatalf("URL changed from %s to %s", url, s.URL())
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	js = connect(t, s.URL())
	kv, err = js.KeyValue(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v" {
		t.Fatalf("after restarts: %v, %v", e, err)
	}
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-node cluster takes up to ten seconds to elect a leader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if n := len(strings.Split(c.URLs(), ",")); n != 3 {
		t.Fatalf("URLs %q", c.URLs())
	}
	js := connect(t, c.URLs())
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "T", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "a current stream leader", func() bool { return c.StreamLeader("KV_T") >= 0 && c.StreamCurrent("KV_T") })
	leader := c.StreamLeader("KV_T")
	c.Nodes[leader].Stop()
	testwait.For(t, 60*time.Second, "a new stream leader", func() bool { l := c.StreamLeader("KV_T"); return l >= 0 && l != leader })
	if err := c.Nodes[leader].Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "the stream caught up", func() bool { return c.StreamCurrent("KV_T") })
	if c.StreamLeader("NO_SUCH_STREAM") != -1 {
		t.Fatal("a leader for a stream that does not exist")
	}
}
