package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// wantExhausted checks err is a retryable RESOURCE_EXHAUSTED: the call ran nothing.
func wantExhausted(t testing.TB, err error) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.ResourceExhausted || !pe.Retryable {
		t.Fatalf("got %v, want a retryable RESOURCE_EXHAUSTED", err)
	}
}

// Abandoned opens of one client lock out no other (issue 15: 32 of them locked every
// client out).
func TestOneClientCannotTakeEverySession(t *testing.T) {
	srv := smallBroker(t)
	startHost(t, connect(t, srv), TransferConfig{Handlers: newStore().handlers(), MaxSessions: 8, MaxSessionsPerClient: 2})
	greedy := newClient(t, connect(t, srv), testPrefix)
	for range 2 {
		if _, err := greedy.open("echo", nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	_, err := greedy.open("echo", nil, 0)
	wantExhausted(t, err)
	other := newClient(t, connect(t, srv), testPrefix)
	if _, err := other.open("echo", nil, 0); err != nil {
		t.Fatalf("a second client could not open a session: %v", err)
	}
}

// One client's share of the bytes leaves room for another, and the bytes come back
// when its sessions close.
func TestOneClientsShareLeavesRoomForOthers(t *testing.T) {
	srv := smallBroker(t)
	budget := NewBudget(8000, 4000)
	startHost(t, connect(t, srv), TransferConfig{Handlers: newStore().handlers(), Budget: budget})
	greedy := newClient(t, connect(t, srv), testPrefix)
	a, _ := greedy.open("echo", nil, 2048)
	b, _ := greedy.open("echo", nil, 2048)
	if err := greedy.write(a.ID, 0, payload(2048)); err != nil {
		t.Fatal(err)
	}
	if err := greedy.write(b.ID, 0, payload(1900)); err != nil {
		t.Fatal(err)
	}
	wantExhausted(t, greedy.write(b.ID, 1, payload(200)))

	other := newClient(t, connect(t, srv), testPrefix)
	o, _ := other.open("echo", nil, 2048)
	if err := other.writeAll(o.ID, 2048, payload(4000)); err != nil {
		t.Fatalf("a second client could not use its share: %v", err)
	}
	if got := budget.Used(); got != 2048+1900+4000 {
		t.Fatalf("budget used %d", got)
	}
	for _, id := range []string{a.ID, b.ID} {
		if err := greedy.close(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := budget.Used(); got != 4000 {
		t.Fatalf("budget used %d after the first client's sessions closed, want 4000", got)
	}
}

// Every host of an engine takes from the one budget.
func TestHostsShareOneBudget(t *testing.T) {
	srv := smallBroker(t)
	budget := NewBudget(3000, 3000)
	startHost(t, connect(t, srv), TransferConfig{Prefix: "abi.svc.a.v1.transfer", Handlers: newStore().handlers(), Budget: budget})
	startHost(t, connect(t, srv), TransferConfig{Prefix: "abi.svc.b.v1.transfer", Handlers: newStore().handlers(), Budget: budget})
	nc := connect(t, srv)
	ca, cb := newClient(t, nc, "abi.svc.a.v1.transfer"), newClient(t, nc, "abi.svc.b.v1.transfer")
	a, _ := ca.open("echo", nil, 2048)
	if err := ca.write(a.ID, 0, payload(2048)); err != nil {
		t.Fatal(err)
	}
	b, _ := cb.open("echo", nil, 2048)
	wantExhausted(t, cb.write(b.ID, 0, payload(1000)))
}

// A session busy enough never to idle-expire still ends at its maximum lifetime
// (issue 15: a chunk every < 60 s kept one alive for ever).
func TestSessionsEndAtTheirMaximumLifetime(t *testing.T) {
	srv := smallBroker(t)
	clock := newFakeClock()
	h, err := NewTransferHost(connect(t, srv), TransferConfig{
		Prefix: testPrefix, Handlers: newStore().handlers(), Clock: clock, LeaseValid: leaseHeld,
		IdleTimeout: time.Minute, MaxLifetime: 5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	reapedAt := watchReaps(h)
	spawnAndServe(t, h)
	c := newClient(t, connect(t, srv), testPrefix)
	o, _ := c.open("echo", nil, 0)
	seq := uint64(0)
	for range 5 { // 5 × 59 s = 4 min 55 s: alive
		handled(t, h)
		clock.Advance(59 * time.Second)
		reapedAt(t, clock.Now())
		if err := c.write(o.ID, seq, []byte("a")); err != nil {
			t.Fatalf("write %d before the lifetime ended: %v", seq, err)
		}
		seq++
	}
	clock.Advance(5 * time.Second)
	reapedAt(t, clock.Now())
	wantCode(t, c.write(o.ID, seq, []byte("a")), protocol.NotFound)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.SessionsFinished(ctx); err != nil {
		t.Fatal(err)
	}
}

// Giving back most of the peak asks the trimmer to return memory, once.
func TestBudgetAsksForATrimWhenMostOfThePeakIsBack(t *testing.T) {
	b := NewBudget(1<<30, 1<<30)
	if err := b.take("a", 64<<20); err != nil {
		t.Fatal(err)
	}
	b.give("a", 32<<20)
	select {
	case <-b.trim:
		t.Fatal("a trim asked for with half the peak still held")
	default:
	}
	b.give("a", 32<<20)
	select {
	case <-b.trim:
	default:
		t.Fatal("no trim asked for once the sessions gave everything back")
	}
	if b.Used() != 0 || len(b.clients) != 0 {
		t.Fatalf("used %d, clients %v", b.Used(), b.clients)
	}
}

func TestClientOf(t *testing.T) {
	for in, want := range map[string]string{
		"_INBOX.abc.def":       "_INBOX.abc",
		"_INBOX_alice.abc.def": "_INBOX_alice.abc",
		"_INBOX.abc":           "_INBOX.abc",
		"reply":                "reply",
		"":                     "",
	} {
		if got := ClientOf(in); got != want {
			t.Errorf("ClientOf(%q) = %q, want %q", in, got, want)
		}
	}
}
