package primaries

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/primaries/internal/transfertest"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// bigService answers "big" with more than one message can carry.
func bigService(reply []byte) Service {
	return Service{Name: "test_svc", Operations: map[string]Operation{
		"big": func(context.Context, []byte) ([]byte, error) { return reply, nil },
	}}
}

func TestReplyAboveMaxPayloadWithoutOverflowHost(t *testing.T) {
	srv := natstest.Start(t, natstest.WithMaxPayload(8<<10))
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	p := newPrimary(t, nc, bigService(bytes.Repeat([]byte("x"), 20<<10)), "engine-a", 4, alwaysValid)
	serve(t, p)
	_, err := transfertest.Call(client, protocol.ServiceSubject("test_svc", "big"), nil, struct{}{}, nil)
	if protocol.CodeOf(err) != protocol.PayloadTooLarge {
		t.Fatalf("err = %v, want PAYLOAD_TOO_LARGE", err)
	}
	// The call's count is released once its answer is published: the caller may read
	// the answer a moment before.
	testwait.For(t, waitTimeout, "no call in flight after the answer", func() bool { return p.InFlight() == 0 })
}

// A reply too large for one message is parked on the overflow host; the caller reads
// it through the transfer protocol.
func TestReplyAboveMaxPayloadIsParked(t *testing.T) {
	srv := natstest.Start(t, natstest.WithMaxPayload(8<<10))
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	owner := sessions.NewOwnerID()
	o, err := sessions.NewOverflowHost(natstest.Connect(t, srv.URL()), sessions.OverflowConfig{Owner: owner, LeaseValid: func() bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	o.Spawn(h.engine)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			t.Errorf("close the overflow host: %v", err)
		}
	})
	if err := o.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789"), 3<<10)
	p, err := New(bigService(big), Config{Conn: nc, InstanceID: owner, MaxConcurrent: 4, LeaseValid: alwaysValid, Overflow: o})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	serve(t, p)

	m, err := transfertest.Call(client, protocol.ServiceSubject("test_svc", "big"),
		nats.Header{protocol.HeaderOverflow: []string{"1"}}, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var env protocol.OverflowEnvelope
	if err := json.Unmarshal(m.Data, &env); err != nil || env.Overflow == nil {
		t.Fatalf("reply %q is not an overflow notice", m.Data)
	}
	if m.Header.Get(protocol.HeaderOverflowReply) != env.Overflow.ID || m.Header.Get(protocol.HeaderInstance) != owner {
		t.Fatalf("notice headers %v", m.Header)
	}
	c := transfertest.Client{NC: client, Prefix: env.Overflow.Prefix}
	got, err := c.ReadAll(env.Overflow.ID)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("parked reply: %d bytes, %v", len(got), err)
	}
	if err := c.Close(env.Overflow.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.SessionsFinished(ctx); err != nil {
		t.Fatal(err)
	}
}
