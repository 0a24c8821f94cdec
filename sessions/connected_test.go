package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats.go"
)

// Draining a queue subscription while the connection reconnects must not leave it at
// the broker: nats.go would resend its SUB and then drop it on the client only, and
// requests would vanish instead of finding no responders.
func TestStopDeliveryWhileReconnectingLeavesNoSubscription(t *testing.T) {
	srv := natstest.Start(t, natstest.WithoutJetStream())
	nc := natstest.Connect(t, srv.URL())
	sub, err := nc.QueueSubscribe("svc.reconnect", "q", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) })
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := StopDelivery(ctx, nc, sub)
		done <- err
	}()
	srv.Restart()
	if err := <-done; err != nil {
		t.Fatalf("StopDelivery: %v", err)
	}
	caller := natstest.Connect(t, srv.URL())
	if _, err := caller.Request("svc.reconnect", nil, 2*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request after the drain = %v, want no responders (a subscription left at the broker swallows it)", err)
	}
}

func TestWaitConnectedEndsWithTheContextOrTheConnection(t *testing.T) {
	srv := natstest.Start(t, natstest.WithoutJetStream())
	nc := natstest.Connect(t, srv.URL())
	if err := WaitConnected(context.Background(), nc); err != nil {
		t.Fatalf("connected: %v", err)
	}
	gone := nc.StatusChanged(nats.RECONNECTING)
	defer nc.RemoveStatusListener(gone)
	srv.Stop()
	select {
	case <-gone: // the client noticed the broker is gone
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not notice the broker had gone")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := WaitConnected(ctx, nc); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while the broker is away: %v", err)
	}
	nc.Close()
	if err := WaitConnected(context.Background(), nc); err != nil {
		t.Fatalf("closed: %v", err)
	}
}
