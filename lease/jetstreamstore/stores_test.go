package jetstreamstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStoreProofs: what a holder publishes under store.<service> reads back as it was;
// nothing published reads as not ok; a value that is not a proof is an error naming
// the key.
func TestStoreProofs(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.ReadStore(ctx, "keyvalue"); ok || err != nil {
		t.Fatalf("nothing published: ok %v, err %v", ok, err)
	}
	p := jetstreamstore.StoreProof{InstanceID: strings.Repeat("a", 32), Service: "keyvalue", Backend: "postgres", ID: "0123", Where: "database d, table t"}
	if err := s.PublishStore(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.ReadStore(ctx, "keyvalue"); !ok || err != nil || got != p {
		t.Fatalf("read back %+v, %v, %v; want %+v", got, ok, err, p)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "ABI_ENGINE")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, jetstreamstore.StoreKeyPrefix+"keyvalue", []byte("not a proof")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadStore(ctx, "keyvalue"); err == nil || !strings.Contains(err.Error(), "store.keyvalue") {
		t.Fatalf("a foreign value read as %v; want an error naming store.keyvalue", err)
	}
}
