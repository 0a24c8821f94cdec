package broker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestLeavesHaveADomainEach: each server's own JetStream is its domain, and once
// StartLeaves returns, a leaf node reaches the other's domain through the hub.
func TestLeavesHaveADomainEach(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := StartLeaves(ctx, t.TempDir(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	nc, err := nats.Connect(l.Nodes[1].URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	own, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := own.AccountInfo(ctx); err != nil || info.Domain != LeafDomain(1) {
		t.Fatalf("a leaf node's own JetStream: %+v %v, want domain %s", info, err, LeafDomain(1))
	}
	for _, d := range []string{HubDomain, LeafDomain(0)} {
		js, err := jetstream.NewWithDomain(nc, d)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := js.AccountInfo(ctx); err != nil || info.Domain != d {
			t.Fatalf("domain %s through the other leaf node: %+v %v", d, info, err)
		}
	}
}
