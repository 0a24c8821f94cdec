package primaries

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/micro"

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

// stubRequest is a received call as the backlog sees it: its body and no reply subject,
// so its refusal is made and released but published nowhere.
type stubRequest struct{ micro.Request }

func (stubRequest) Data() []byte           { return []byte(`{}`) }
func (stubRequest) Reply() string          { return "" }
func (stubRequest) Headers() micro.Headers { return nil }

// A call that finds every slot taken waits in the backlog for the answer of a running
// call to hand it the slot, and gets it even when that answer had found the backlog
// empty just before the call was pushed: the slot it then frees goes to the call. Before,
// the slot was freed with the call still waiting, for the next call to come (for good,
// when none came, and Stop's SessionsFinished waited for it until its bound).
func TestASlotFreedAsACallWaitsIsHandedToIt(t *testing.T) {
	srv := natstest.Start(t, natstest.WithoutJetStream())
	p := newPrimary(t, natstest.Connect(t, srv.URL()), newGated("a").service(), "engine-a", 1, alwaysValid)
	r := newRun()
	r.cancel(errStopped) // a call handed a slot is refused at once

	p.sem <- struct{}{} // the only slot, taken by a running call
	r.calls.add()
	// The running call is answered and finds no call waiting (next), so it will free
	// its slot; before it does, a call arrives, finds the slot taken and waits.
	r.calls.add()
	p.enqueue(r, job{name: "echo", req: stubRequest{}})
	if len(p.backlog) != 1 {
		t.Fatalf("%d calls wait, want the one that found the slot taken", len(p.backlog))
	}
	p.free() // the running call's slot
	r.calls.done()

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := r.finished(ctx, false); err != nil {
		t.Fatalf("the waiting call was not answered (%d calls unanswered, %d waiting, %d of 1 slots taken): %v",
			r.calls.load(), len(p.backlog), len(p.sem), err)
	}
	if len(p.sem) != 0 {
		t.Fatal("the slot is still taken once every call was answered")
	}
}
