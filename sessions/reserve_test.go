package sessions

import (
	"context"
	"sync/atomic"
	"testing"
)

// A handler that reserves what it is about to produce (a download, from the object's
// size) is refused before it produces anything when the budget cannot hold it, and
// what it reserved counts for its result: a smaller result gives the rest back, a
// larger one takes only the difference (issue 26: N starts read N objects before their
// sessions asked for the bytes).
func TestAHandlerReservesBeforeItProduces(t *testing.T) {
	srv := smallBroker(t)
	budget := NewBudget(10000, 10000)
	var produced atomic.Int64
	handler := func(size, result int) Handler {
		return func(ctx context.Context, req TransferRequest) ([]byte, error) {
			if err := req.Reserve(ctx, int64(size)); err != nil {
				return nil, err
			}
			produced.Add(1)
			return payload(result), nil
		}
	}
	startHost(t, connect(t, srv), TransferConfig{Budget: budget, Handlers: map[string]Handler{
		"big":     handler(6000, 6000),
		"shrinks": handler(6000, 1000),
		"grows":   handler(1000, 3000),
	}})
	c := newClient(t, connect(t, srv), testPrefix)

	held, _ := c.open("big", nil, 2048)
	if _, err := c.start(held.ID); err != nil {
		t.Fatal(err)
	}
	if got := budget.Used(); got != 6000 {
		t.Fatalf("budget used %d after a start that reserved and produced 6000", got)
	}
	refused, _ := c.open("big", nil, 2048)
	_, err := c.start(refused.ID)
	wantExhausted(t, err)
	if n := produced.Load(); n != 1 {
		t.Fatalf("%d handlers produced their result; the refused one must have stopped at its reservation", n)
	}
	if got := budget.Used(); got != 6000 {
		t.Fatalf("budget used %d after a refused reservation, want 6000", got)
	}

	shrinks, _ := c.open("shrinks", nil, 2048)
	wantExhausted(t, startErr(c, shrinks.ID)) // 6000 more do not fit beside 6000
	if err := c.close(held.ID); err != nil {
		t.Fatal(err)
	}
	shrinks, _ = c.open("shrinks", nil, 2048)
	if _, err := c.start(shrinks.ID); err != nil {
		t.Fatal(err)
	}
	if got := budget.Used(); got != 1000 {
		t.Fatalf("budget used %d after a result of 1000 on a reservation of 6000, want 1000", got)
	}
	grows, _ := c.open("grows", nil, 2048)
	if _, err := c.start(grows.ID); err != nil {
		t.Fatal(err)
	}
	if got := budget.Used(); got != 4000 {
		t.Fatalf("budget used %d after a result of 3000 on a reservation of 1000 beside 1000, want 4000", got)
	}
	out, err := c.readAll(grows.ID)
	if err != nil || len(out) != 3000 {
		t.Fatalf("read %d bytes, %v; want the 3000 produced", len(out), err)
	}
	for _, id := range []string{shrinks.ID, grows.ID} {
		if err := c.close(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := budget.Used(); got != 0 {
		t.Fatalf("budget used %d once every session closed", got)
	}
}

func startErr(c *client, id string) error {
	_, err := c.start(id)
	return err
}
