package jetstream

import (
	"context"
	"errors"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/broker"
	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/natstest"
)

// TestOneDomainAcrossLeafNodes: two stores on different leaf nodes, both naming leaf
// node 0's JetStream domain, work on one bucket: each reads what the other wrote, with
// the epoch-checked writes and the atomic batches (set_if_not_exists, delete) of both,
// and the epoch one adopts fences the other. No bucket is made in leaf node 1's own
// domain. Without jsdomain's subjects, the remote store's writes never reach the
// bucket: a server does not carry $KV.> across a leaf connection between domains.
func TestOneDomainAcrossLeafNodes(t *testing.T) {
	l := natstest.StartLeaves(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	domain := broker.LeafDomain(0)
	var stores []*Store
	for _, n := range l.Nodes {
		j, err := jsdomain.New(natstest.Connect(t, n.URL()), domain)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(ctx, j, Config{Bucket: "ABI_KV"})
		if err != nil {
			t.Fatalf("open through %s: %v", n.Name(), err)
		}
		stores = append(stores, s)
	}
	local, remote := stores[0], stores[1]
	for i, s := range stores {
		if err := s.AdoptEpoch(ctx, 1); err != nil {
			t.Fatalf("store %d: adopt: %v", i, err)
		}
	}
	for i, s := range stores {
		if err := s.Set(ctx, "k", []byte{byte('a' + i)}, 0); err != nil {
			t.Fatalf("store %d: set: %v", i, err)
		}
		if v, found, err := stores[1-i].Get(ctx, "k"); err != nil || !found || string(v) != string(rune('a'+i)) {
			t.Fatalf("store %d's write read by the other: %q %v %v", i, v, found, err)
		}
	}
	if ok, err := remote.SetIfNotExists(ctx, "once", []byte("r"), 0); err != nil || !ok {
		t.Fatalf("set_if_not_exists through the other leaf node: %v %v", ok, err)
	}
	if ok, err := local.SetIfNotExists(ctx, "once", []byte("l"), 0); err != nil || ok {
		t.Fatalf("second set_if_not_exists = %v %v, want refused", ok, err)
	}
	if ok, err := remote.Delete(ctx, "once"); err != nil || !ok {
		t.Fatalf("delete through the other leaf node: %v %v", ok, err)
	}
	if err := local.AdoptEpoch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := remote.Set(ctx, "k", []byte("stale"), 0); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("a write under the superseded epoch = %v, want fenced", err)
	}
	own, err := js.New(natstest.Connect(t, l.Nodes[1].URL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Stream(ctx, "KV_ABI_KV"); !errors.Is(err, js.ErrStreamNotFound) {
		t.Fatalf("leaf node 1's own domain has the bucket's stream (%v): the store wrote outside its domain", err)
	}
}
