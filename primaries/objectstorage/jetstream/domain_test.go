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
// node 0's JetStream domain, work on one bucket (object store subjects reach the
// domain's stream by interest), and an epoch adopted through one fences the other.
func TestOneDomainAcrossLeafNodes(t *testing.T) {
	l := natstest.StartLeaves(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stores []*Store
	for _, n := range l.Nodes {
		j, err := jsdomain.New(natstest.Connect(t, n.URL()), broker.LeafDomain(0))
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(ctx, j, Config{})
		if err != nil {
			t.Fatalf("open through %s: %v", n.Name(), err)
		}
		if err := s.AdoptEpoch(ctx, 1); err != nil {
			t.Fatalf("adopt through %s: %v", n.Name(), err)
		}
		stores = append(stores, s)
	}
	content := make([]byte, 300<<10) // several chunks
	for i, s := range stores {
		content[0] = byte(i)
		if err := s.PutObject(ctx, "p", "o", content); err != nil {
			t.Fatalf("store %d: put: %v", i, err)
		}
		got, err := stores[1-i].GetObject(ctx, "p", "o")
		if err != nil || len(got) != len(content) || got[0] != byte(i) {
			t.Fatalf("store %d's object read by the other: %d bytes, %v", i, len(got), err)
		}
	}
	if err := stores[0].AdoptEpoch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].PutObject(ctx, "p", "o", content); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("a put under the superseded epoch = %v, want fenced", err)
	}
	own, err := js.New(natstest.Connect(t, l.Nodes[1].URL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.Stream(ctx, "OBJ_"+DefaultBucket); !errors.Is(err, js.ErrStreamNotFound) {
		t.Fatalf("leaf node 1's own domain has the bucket's stream (%v)", err)
	}
}
