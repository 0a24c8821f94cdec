package jetstream

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/natstest"
)

// TestObjectsAboveASmallMaxPayload: on a broker whose max payload is below nats.go's
// 128 KiB chunks, an object larger than one message is stored in chunks that fit, and
// reads back, through the store and through nats.go.
func TestObjectsAboveASmallMaxPayload(t *testing.T) {
	srv := natstest.Start(t, natstest.WithMaxPayload(64<<10))
	s := open(t, srv.URL(), "OBJ_SMALL_PAYLOAD")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("0123456789abcdef"), 192<<10/16)
	if err := s.PutObject(ctx, "dir", "big", content); err != nil {
		t.Fatalf("put of %d bytes on a 64 KiB broker: %v", len(content), err)
	}
	got, err := s.GetObject(ctx, "dir", "big")
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("get: %d bytes, %v; want %d bytes", len(got), err, len(content))
	}
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := j.ObjectStore(ctx, "OBJ_SMALL_PAYLOAD")
	if err != nil {
		t.Fatal(err)
	}
	r, err := obs.Get(ctx, "dir/big")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("nats.go read: %d bytes, %v; want %d bytes", len(got), err, len(content))
	}
}
