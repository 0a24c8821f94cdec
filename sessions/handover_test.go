package sessions

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// A transfer open at the handover finishes on its engine, while new opens reach the
// next engine, started on another connection.
func TestATransferOpenAtTheHandoverFinishesOnItsHost(t *testing.T) {
	srv := smallBroker(t)
	s := newStore()
	data := payload(4*8192 + 1)
	s.objects["k"] = data
	old := startHost(t, connect(t, srv), TransferConfig{Handlers: s.handlers()})
	c := newClient(t, connect(t, srv), testPrefix)

	o, err := c.open("get", objectMeta{Key: "k"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.start(o.ID); err != nil {
		t.Fatal(err)
	}
	first, err := c.read(o.ID, 0)
	if err != nil {
		t.Fatal(err)
	}

	next := startHost(t, connect(t, srv), TransferConfig{Handlers: s.handlers()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := old.StopAccepting(ctx); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		n, err := c.open("echo", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if owner, _, _ := ParseSessionID(n.ID); owner != next.Owner() {
			t.Fatalf("an open after StopAccepting went to %s, not the next engine %s", owner, next.Owner())
		}
		if _, err := c.start(n.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.close(n.ID); err != nil {
			t.Fatal(err)
		}
	}

	// The old session is still served by its owner, and holds the old host's drain.
	got := first.Data
	for seq := uint64(1); ; seq++ {
		r, err := c.read(o.ID, seq)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Data...)
		if r.Done {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, want %d", len(got), len(data))
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := old.SessionsFinished(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SessionsFinished = %v while a read-out session is still open", err)
	}
	if err := c.close(o.ID); err != nil {
		t.Fatal(err)
	}
	if err := WaitForSessions(ctx, time.Now().Add(10*time.Second), old); err != nil {
		t.Fatal(err)
	}
}

// A stuck transfer is closed at the drain deadline: the wait gives up, Stop closes it
// and cancels its handler, and its owner subjects are gone.
func TestAStuckTransferIsClosedAtStop(t *testing.T) {
	srv := smallBroker(t)
	handlerRunning := make(chan struct{})
	h := startHost(t, connect(t, srv), TransferConfig{Handlers: map[string]Handler{
		"stuck": func(ctx context.Context, _ TransferRequest) ([]byte, error) {
			close(handlerRunning)
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"echo": newStore().handlers()["echo"],
	}})
	c := newClient(t, connect(t, srv), testPrefix)
	stuck, _ := c.open("stuck", nil, 0)
	idle, _ := c.open("echo", nil, 0)
	started := make(chan error, 1)
	go func() {
		_, err := c.start(stuck.ID)
		started <- err
	}()
	<-handlerRunning

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.StopAccepting(ctx); err != nil {
		t.Fatal(err)
	}
	if err := WaitForSessions(ctx, time.Now().Add(200*time.Millisecond), h); !errors.Is(err, ErrSessionsOpen) {
		t.Fatalf("WaitForSessions = %v, want ErrSessionsOpen", err)
	}
	h.Stop()
	wantCode(t, <-started, protocol.NotFound)
	if n := h.Sessions(); n != 0 {
		t.Fatalf("%d sessions open after Stop", n)
	}
	if _, err := c.read(idle.ID, 0); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("read after Stop: %v, want no responders", err)
	}
	if err := h.SessionsFinished(ctx); err != nil {
		t.Fatal(err)
	}
}

// An oversized reply parked before StopAccepting can still be read during the drain,
// and the drain waits for it.
func TestAReplyParkedBeforeTheHandoverIsReadDuringTheDrain(t *testing.T) {
	srv := smallBroker(t)
	o := startOverflow(t, connect(t, srv), OverflowConfig{})
	big := payload(5 * testMaxPayload)
	serviceConn := connect(t, srv)
	if _, err := serviceConn.Subscribe("svc.big", func(m *nats.Msg) {
		if err := o.Reply(context.Background(), m, big, nil); err != nil {
			t.Errorf("reply: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := serviceConn.Flush(); err != nil { // subscribed at the broker before the call
		t.Fatal(err)
	}
	c := newClient(t, connect(t, srv), protocol.OverflowPrefix)
	ref := callOverflowing(t, c, "svc.big", o.Owner())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.StopAccepting(ctx); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- WaitForSessions(ctx, time.Now().Add(10*time.Second), o) }()

	got, err := c.readAll(ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) || int64(len(got)) != ref.Size {
		t.Fatalf("read %d bytes, want %d", len(got), len(big))
	}
	select {
	case err := <-drained:
		t.Fatalf("the drain ended (%v) before the parked reply was closed", err)
	default:
	}
	if err := c.close(ref.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}

func startOverflow(t *testing.T, nc *nats.Conn, cfg OverflowConfig) *OverflowHost {
	t.Helper()
	if cfg.LeaseValid == nil {
		cfg.LeaseValid = leaseHeld
	}
	o, err := NewOverflowHost(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	spawnAndServe(t, o.TransferHost)
	return o
}

// callOverflowing calls subject accepting an overflowed reply, and returns where the
// reply was parked.
func callOverflowing(t *testing.T, c *client, subject, owner string) *protocol.OverflowRef {
	t.Helper()
	var env protocol.OverflowEnvelope
	msg, err := c.call(subject, owner, nats.Header{protocol.HeaderOverflow: []string{"1"}}, struct{}{}, &env)
	if err != nil {
		t.Fatal(err)
	}
	id, size, ok, err := protocol.OverflowFromHeaders(msg.Header.Get)
	if err != nil || !ok || env.Overflow == nil || id != env.Overflow.ID || size != env.Overflow.Size {
		t.Fatalf("overflow reply: headers %v, body %s, %v", msg.Header, msg.Data, err)
	}
	if env.Overflow.Prefix != protocol.OverflowPrefix || env.Overflow.ChunkBytes != testMaxPayload/2 {
		t.Fatalf("overflow ref %+v", env.Overflow)
	}
	return env.Overflow
}
