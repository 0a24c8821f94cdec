package primaries

import (
	"strconv"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// With every slot taken, calls wait in the backlog, and those beyond it are refused at
// once with a retryable RESOURCE_EXHAUSTED: the callback never waits, so nothing piles
// up in the subscription's buffer to be dropped unanswered. Before, the callback waited
// for the slot and every call beyond it sat uncounted in the buffer.
func TestCallsBeyondTheBacklogAreRefusedAtOnce(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("a")
	p := newPrimary(t, nc, g.service(), "engine-a", 1, alwaysValid)
	serve(t, p)

	running := callAsync(client, "work", "running")
	recv(t, g.started, "the running call to start")
	const extra = 10
	answers := make(chan result, backlogSize(1)+extra)
	for i := range backlogSize(1) + extra {
		go func() { answers <- <-callAsync(client, "echo", strconv.Itoa(i)) }()
	}
	// The slot stays taken, so the first answers are the refusals.
	for range extra {
		if r := recv(t, answers, "a refusal"); r.werr == nil || r.werr.Code != protocol.ResourceExhausted || !r.werr.Retryable {
			t.Fatalf("call %s answered %v %+v while the slot was taken, want a retryable RESOURCE_EXHAUSTED", r.id, r.err, r.werr)
		}
	}
	g.open()
	recv(t, running, "the running call")
	for range backlogSize(1) {
		if r := recv(t, answers, "a waiting call"); r.err != nil || r.werr != nil {
			t.Fatalf("call %s waited in the backlog and was answered %v %+v, want success", r.id, r.err, r.werr)
		}
	}
}
