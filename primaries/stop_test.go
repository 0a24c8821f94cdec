package primaries

import (
	"context"
	"errors"
	"github.com/abi-engine/engine/internal/testwait"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// Stop drains the subscriptions: every call the broker routed to the primary before
// the UNSUB is handed to the callback and refused, UNAVAILABLE retryable, and
// SessionsFinished returns only once each has been answered, its answer handed to the
// connection. So an engine that closes its connection right after (one that ends as
// lost) leaves no caller waiting for its timeout: issue 9 item 6, the resumed zombie.
// Before, SessionsFinished saw only the calls already counted, and the ones still in
// the subscription's buffer were dropped with the connection.
func TestStopAnswersEveryQueuedCallBeforeSessionsFinish(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old")
	p := newPrimary(t, nc, g.service(), "engine-a", 1, alwaysValid)
	serve(t, p)

	running := callAsync(client, "work", "running")
	recv(t, g.started, "the running call to start")
	// The calls wait for the only slot in the backlog, and those beyond it are refused
	// RESOURCE_EXHAUSTED (backlog.go); any the broker still holds queue in the
	// subscription's buffer, uncounted.
	const queued = 300 // fewer than the backlog holds
	results := make([]<-chan result, queued)
	for i := range results {
		results[i] = callAsync(client, "echo", strconv.Itoa(i))
	}
	testwait.For(t, waitTimeout, "a call waiting for the slot", func() bool { return p.InFlight() >= 2 })

	p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.SessionsFinished(ctx); err != nil {
		t.Fatal(err)
	}
	// Every answer is on the connection by now: the replies are all it publishes.
	published := nc.Stats().OutMsgs
	// What an ending engine does next (supervisor.Conn): a broker round trip, then Close.
	// A bare Close loses answers under load: the PONGs of nats.go's drain goroutines
	// (one flush per drained subscription) may still be unread, and Linux closes a
	// socket with unread input by a reset, which discards what the broker has not read
	// yet (1 run in about 150 lost 63 to 286 answers that way, each published).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()

	if r := recv(t, running, "the running call"); r.werr == nil || r.werr.Code != protocol.Unavailable || r.werr.Retryable {
		t.Errorf("the running call was answered %+v, want UNAVAILABLE, not retryable (it ran)", r)
	}
	refused, unrouted, exhausted := 0, 0, 0
	for _, ch := range results {
		r := recv(t, ch, "a queued call")
		switch {
		case r.werr != nil && r.werr.Code == protocol.Unavailable && r.werr.Retryable:
			refused++
		case r.werr != nil && r.werr.Code == protocol.ResourceExhausted && r.werr.Retryable: // beyond the backlog
			exhausted++
		case errors.Is(r.err, nats.ErrNoResponders): // sent after the UNSUB
			unrouted++
		default:
			t.Fatalf("call %s: error %v, reply error %v; want a retryable refusal (or no responders), not a timeout", r.id, r.err, r.werr)
		}
	}
	if refused == 0 {
		t.Fatal("no call was queued at the Stop; the test proves nothing")
	}
	if answered := uint64(1 + refused + exhausted); published != answered {
		t.Errorf("SessionsFinished returned with %d answers published, want %d: the running call's and each refused one's", published, answered)
	}
	t.Logf("%d queued calls refused, %d beyond the backlog, %d sent after the UNSUB", refused, exhausted, unrouted)
	select {
	case id := <-g.started:
		t.Fatalf("call %s ran after Stop", id)
	default:
	}
}
