package sessions

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

func TestOverflowReplies(t *testing.T) {
	srv := smallBroker(t)
	o := startOverflow(t, connect(t, srv), OverflowConfig{MaxReplyBytes: 64 << 10})
	serviceConn := connect(t, srv)
	replies := map[string][]byte{
		"svc.small": []byte(`{"ok":true}`),
		"svc.big":   payload(3 * testMaxPayload),
		"svc.huge":  payload(64<<10 + 1),
	}
	for subject, data := range replies {
		if _, err := serviceConn.Subscribe(subject, func(m *nats.Msg) {
			if err := o.Reply(context.Background(), m, data, nats.Header{"X-Kept": []string{"yes"}}); err != nil {
				t.Errorf("reply on %s: %v", subject, err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The subscriptions must be at the broker before the first call from another
	// connection.
	if err := serviceConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, connect(t, srv), protocol.OverflowPrefix)
	accept := nats.Header{protocol.HeaderOverflow: []string{"1"}}

	// A reply that fits goes as it is, stamped with the instance.
	msg, err := c.call("svc.small", o.Owner(), accept, struct{}{}, nil)
	if err != nil || string(msg.Data) != `{"ok":true}` || msg.Header.Get("X-Kept") != "yes" {
		t.Fatalf("small reply %q %v, %v", msg.Data, msg.Header, err)
	}

	// Too large and the caller cannot read a parked reply: PAYLOAD_TOO_LARGE.
	_, err = c.call("svc.big", o.Owner(), nil, struct{}{}, nil)
	wantCode(t, err, protocol.PayloadTooLarge)
	if !strings.Contains(err.Error(), protocol.HeaderOverflow) {
		t.Fatalf("the error does not say what was missing: %v", err)
	}

	// Too large and it can: parked, read, closed.
	ref := callOverflowing(t, c, "svc.big", o.Owner())
	wantCode(t, c.write(ref.ID, 0, []byte("x")), protocol.Conflict)
	_, err = c.start(ref.ID)
	wantCode(t, err, protocol.Conflict)
	got, err := c.readAll(ref.ID)
	if err != nil || !bytes.Equal(got, replies["svc.big"]) {
		t.Fatalf("parked reply: %d bytes, %v", len(got), err)
	}
	if err := c.close(ref.ID); err != nil {
		t.Fatal(err)
	}

	// Above the overflow limit: PAYLOAD_TOO_LARGE even for a caller that accepts it.
	_, err = c.call("svc.huge", o.Owner(), accept, struct{}{}, nil)
	wantCode(t, err, protocol.PayloadTooLarge)
	if o.Sessions() != 0 {
		t.Fatalf("%d parked replies left", o.Sessions())
	}

	// Nobody can open a parked reply: the only operation a client opens on the
	// overflow host is an upload (operation request).
	_, err = c.open(protocol.OverflowReplyOperation, nil, 0)
	wantCode(t, err, protocol.InvalidArgument)
	if o.Sessions() != 0 {
		t.Fatalf("%d sessions after a refused open", o.Sessions())
	}
}

func TestOverflowRepliesThroughAMicroEndpoint(t *testing.T) {
	srv := smallBroker(t)
	o := startOverflow(t, connect(t, srv), OverflowConfig{MaxSessions: 1})
	big := payload(2 * testMaxPayload)
	svcConn := connect(t, srv)
	svc, err := micro.AddService(svcConn, micro.Config{Name: "big", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := svc.AddEndpoint("get", micro.HandlerFunc(func(r micro.Request) {
		if err := o.ReplyRequest(context.Background(), r, big, nil); err != nil {
			t.Errorf("reply: %v", err)
		}
	}), micro.WithEndpointSubject("svc.micro.get")); err != nil {
		t.Fatal(err)
	}
	// The endpoint must be subscribed at the broker before the first call.
	if err := svcConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, connect(t, srv), protocol.OverflowPrefix)
	ref := callOverflowing(t, c, "svc.micro.get", o.Owner())

	// One parked reply is the limit: the next is refused, not retryable.
	_, err = c.call("svc.micro.get", o.Owner(), nats.Header{protocol.HeaderOverflow: []string{"1"}}, struct{}{}, nil)
	wantCode(t, err, protocol.ResourceExhausted)
	if pe := err.(*protocol.Error); pe.Retryable {
		t.Fatal("a refused overflow reply is retryable, but its operation has run")
	}

	got, err := c.readAll(ref.ID)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	_ = c.close(ref.ID)
}
