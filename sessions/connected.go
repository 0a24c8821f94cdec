package sessions

import (
	"context"

	"github.com/nats-io/nats.go"
)

// WaitConnected returns once nc is connected, or closed (nothing is left to end at the
// broker), or ctx ends.
//
// Ending a subscription with Drain while the connection is reconnecting was unsafe up
// to nats.go v1.55.0: the UNSUB is not written then, the reconnect sent the SUB again,
// and once drained the subscription was dropped on the client only. The broker kept
// routing requests to it and they vanished: callers timed out instead of reaching the
// engine that serves. v1.56.0 no longer resends a draining subscription; whatever
// drains a shared subscription still waits for the connection first, so the UNSUB
// reaches the broker as a message and the drain is not left to the reconnect.
func WaitConnected(ctx context.Context, nc *nats.Conn) error {
	if nc.IsConnected() || nc.IsClosed() {
		return nil
	}
	ch := nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer nc.RemoveStatusListener(ch)
	for !nc.IsConnected() && !nc.IsClosed() {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
