//go:build failpoints

package jetstream

import (
	"context"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/natstest"
)

// TestResendUnknown: with resend-unknown every write is sent twice, so a conditional
// write answers what its own first copy left: set_if_not_exists "not set" on a key it
// set, delete "not deleted" on a key it deleted (the chaos linearizability check
// catches both).
func TestResendUnknown(t *testing.T) {
	fp, err := failpoint.Parse("resend-unknown")
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(ctx, j, Config{Bucket: "KV_RESEND", Storage: js.MemoryStorage, Failpoints: fp})
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.SetIfNotExists(ctx, "k", []byte("v"), 0)
	if err != nil || set {
		t.Fatalf("set_if_not_exists of an absent key = %v, %v; want false, the resend's answer", set, err)
	}
	if v, found, err := s.Get(ctx, "k"); err != nil || !found || string(v) != "v" {
		t.Fatalf("get = %q, %v, %v; want the value the first copy set", v, found, err)
	}
	deleted, err := s.Delete(ctx, "k")
	if err != nil || deleted {
		t.Fatalf("delete of a present key = %v, %v; want false, the resend's answer", deleted, err)
	}
	if _, found, err := s.Get(ctx, "k"); err != nil || found {
		t.Fatalf("get after the delete = %v, %v; want absent", found, err)
	}
}
