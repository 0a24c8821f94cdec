package sessions

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// wantRefused fails unless err is the lease check's refusal: UNAVAILABLE, retryable.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.Unavailable || !pe.Retryable {
		t.Fatalf("%s without the lease: %v, want UNAVAILABLE, retryable", what, err)
	}
}

// A host whose engine has not confirmed its lease runs no transfer operation (docs/design.md
// §5.8): the open, a write, the start and a read are answered UNAVAILABLE, retryable,
// and leave the session as it was, so each goes on as if never sent once the lease is
// confirmed again. Before the check, a resumed zombie ran what it found queued.
func TestTransferOperationsCheckTheLease(t *testing.T) {
	srv := natstest.Start(t)
	var lease atomic.Bool
	lease.Store(true)
	var runs atomic.Int64
	h := startHost(t, connect(t, srv), TransferConfig{
		LeaseValid: lease.Load,
		Handlers: map[string]Handler{"echo": func(_ context.Context, req TransferRequest) ([]byte, error) {
			runs.Add(1)
			return req.Upload, nil
		}},
	})
	c := newClient(t, connect(t, srv), testPrefix)
	o, err := c.open("echo", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := payload(3 * o.ChunkBytes)
	if err := c.write(o.ID, 0, data[:o.ChunkBytes]); err != nil {
		t.Fatal(err)
	}

	lease.Store(false)
	_, err = c.open("echo", nil, 0)
	wantRefused(t, "an open", err)
	if n := h.Sessions(); n != 1 {
		t.Fatalf("%d sessions open after a refused open, want 1", n)
	}
	wantRefused(t, "a write", c.write(o.ID, 1, data[o.ChunkBytes:2*o.ChunkBytes]))
	_, err = c.start(o.ID)
	wantRefused(t, "a start", err)
	if n := runs.Load(); n != 0 {
		t.Fatalf("the operation ran %d times without the lease", n)
	}

	lease.Store(true)
	if err := c.writeAll(o.ID, o.ChunkBytes, data); err == nil {
		t.Fatal("a rewrite from sequence 0 succeeded: the session lost its first write")
	}
	for seq := uint64(1); seq < 3; seq++ { // the refused write did not count
		if err := c.write(o.ID, seq, data[seq*uint64(o.ChunkBytes):(seq+1)*uint64(o.ChunkBytes)]); err != nil {
			t.Fatalf("write %d after the refusal: %v", seq, err)
		}
	}
	if size, err := c.start(o.ID); err != nil || size != int64(len(data)) {
		t.Fatalf("start after the refusal: %d %v, want %d bytes", size, err, len(data))
	}

	lease.Store(false)
	_, err = c.read(o.ID, 0)
	wantRefused(t, "a read", err)
	lease.Store(true)
	got, err := c.readAll(o.ID) // from sequence 0: the refused read did not count
	if err != nil || !bytes.Equal(got, data) || runs.Load() != 1 {
		t.Fatalf("read after the refusal: %d bytes, %v, %d runs; want the %d bytes of one run", len(got), err, runs.Load(), len(data))
	}
	lease.Store(false)
	if err := c.close(o.ID); err != nil { // a close frees memory only: it always runs
		t.Fatalf("close without the lease: %v", err)
	}
	if n := h.Sessions(); n != 0 {
		t.Fatalf("%d sessions open after the close", n)
	}
}

// The overflow host checks the lease too: a parked reply is not read while the engine
// has not confirmed its lease.
func TestParkedRepliesCheckTheLease(t *testing.T) {
	srv := smallBroker(t)
	var lease atomic.Bool
	lease.Store(true)
	o := startOverflow(t, connect(t, srv), OverflowConfig{LeaseValid: lease.Load})
	big := payload(3 * testMaxPayload)
	serviceConn := connect(t, srv)
	if _, err := serviceConn.Subscribe("svc.big", func(m *nats.Msg) {
		if err := o.Reply(context.Background(), m, big, nil); err != nil {
			t.Errorf("reply: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := serviceConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, connect(t, srv), protocol.OverflowPrefix)
	ref := callOverflowing(t, c, "svc.big", o.Owner())
	lease.Store(false)
	_, err := c.read(ref.ID, 0)
	wantRefused(t, "a read of a parked reply", err)
	lease.Store(true)
	got, err := c.readAll(ref.ID)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read after the refusal: %d bytes, %v; want %d", len(got), err, len(big))
	}
	if err := c.close(ref.ID); err != nil {
		t.Fatal(err)
	}
}
