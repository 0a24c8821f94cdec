package sessions

import (
	"context"

	"github.com/nats-io/nats.go"
)

// WaitConnected returns once nc is connected, or closed (nothing is left to end at the
// broker), or ctx ends.
//
// Ending a subscription with Drain while the connection is reconnecting is unsafe in
// nats.go v1.55.0: the UNSUB is not written then, the reconnect sends the SUB again,
// and once drained the subscription is dropped on the client only. The broker keeps
// routing requests to it and they vanish: callers time out instead of reaching the
// engine that serves. So whatever drains a shared subscription waits for the
// connection first.
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
