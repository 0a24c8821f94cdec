package primaries

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
)

// WaitSuccessor returns once the named instance's service answers $SRV.INFO with every
// endpoint of ours; neither our own service nor another instance's, nor the new
// holder's with fewer endpoints, will do. Once it has returned, our primary may stop
// accepting: the next call finds the successor, never "no responders".
func TestWaitSuccessorConfirmsTheNewHolderAtTheBroker(t *testing.T) {
	srv := natstest.Start(t)
	ours := newPrimary(t, natstest.Connect(t, srv.URL()), newGated("a").service(), "engine-a", 4, alwaysValid)
	serve(t, ours)
	notYet := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := WaitSuccessor(ctx, nil, "engine-b", ours); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: WaitSuccessor = %v, want it to wait until its context ends", what, err)
		}
	}
	notYet("only our own service")
	other := newPrimary(t, natstest.Connect(t, srv.URL()), newGated("c").service(), "engine-c", 4, alwaysValid)
	serve(t, other)
	notYet("another engine's service")
	partial := newGated("b").service()
	delete(partial.Operations, "work")
	fewer := newPrimary(t, natstest.Connect(t, srv.URL()), partial, "engine-b", 4, alwaysValid)
	serve(t, fewer)
	notYet("the new holder's service without one of our endpoints")
	stopCtx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := other.StopAccepting(stopCtx); err != nil {
		t.Fatal(err)
	}
	if err := fewer.StopAccepting(stopCtx); err != nil {
		t.Fatal(err)
	}

	next := newPrimary(t, natstest.Connect(t, srv.URL()), newGated("b").service(), "engine-b", 4, alwaysValid)
	confirmed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		confirmed <- WaitSuccessor(ctx, nil, "engine-b", ours)
	}()
	select {
	case err := <-confirmed:
		t.Fatalf("confirmed before the new holder served: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	serve(t, next)
	if err := recv(t, confirmed, "the confirmation"); err != nil {
		t.Fatal(err)
	}
	if err := ours.StopAccepting(stopCtx); err != nil {
		t.Fatal(err)
	}
	client := natstest.Connect(t, srv.URL())
	for _, op := range []string{"echo", "echo", "echo"} {
		if res := call(client, op, "after", waitTimeout); res.err != nil || res.instance() != "engine-b" {
			t.Fatalf("a call after the handover: %v, answered by %q; want engine-b", res.err, res.instance())
		}
	}
}

// A primary that holds no subscriptions (its Serve failed, or it never served) is not
// waited for: the successor may not serve that service either (the same broken
// bucket), and waiting for it would keep every other service of ours answering beside
// the successor's until the successor phase's deadline.
func TestWaitSuccessorSkipsAPrimaryThatDoesNotServe(t *testing.T) {
	srv := natstest.Start(t)
	ours := newPrimary(t, natstest.Connect(t, srv.URL()), newGated("a").service(), "engine-a", 4, alwaysValid)
	serve(t, ours)
	broken := newGated("a").service()
	broken.Name = "broken"
	idle := newPrimary(t, natstest.Connect(t, srv.URL()), broken, "engine-a", 4, alwaysValid)
	next := newPrimary(t, natstest.Connect(t, srv.URL()), newGated("b").service(), "engine-b", 4, alwaysValid)
	serve(t, next)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := WaitSuccessor(ctx, nil, "engine-b", ours, idle); err != nil {
		t.Fatalf("WaitSuccessor = %v; want it to return once engine-b serves the one service ours serves", err)
	}
}
