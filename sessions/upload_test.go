package sessions

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
)

// callers is a TokenVerifier whose tokens are their callers' names prefixed "t-".
type callers struct{}

func (callers) Verify(token string) (string, error) {
	if len(token) < 3 || token[:2] != "t-" {
		return "", errors.New("not a token")
	}
	return token[2:], nil
}

// pbExchange sends a protobuf transfer request with token and decodes the reply.
func pbExchange(t *testing.T, nc *nats.Conn, subject, token string, req proto.Message, rep interface {
	proto.Message
	GetError() *commonv1.CallError
}) *commonv1.CallError {
	t.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.RequestMsg(&nats.Msg{Subject: subject, Data: body, Header: nats.Header{protocol.HeaderAuthToken: {token}}}, callTimeout)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if err := proto.Unmarshal(m.Data, rep); err != nil {
		t.Fatalf("%s: reply %x: %v", subject, m.Data, err)
	}
	return rep.GetError()
}

// openUpload opens an overflow upload as caller and writes data into it.
func openUpload(t *testing.T, nc *nats.Conn, o *OverflowHost, caller string, data []byte) string {
	t.Helper()
	var open transferv1.OpenResponse
	if e := pbExchange(t, nc, OpenSubject(protocol.OverflowPrefix), "t-"+caller,
		&transferv1.OpenRequest{Operation: protocol.OverflowRequestOperation}, &open); e != nil {
		t.Fatalf("open: %v", e)
	}
	chunk := int(open.GetChunkBytes())
	for seq := 0; seq*chunk < len(data); seq++ {
		if e := pbExchange(t, nc, OwnerSubject(protocol.OverflowPrefix, o.Owner(), protocol.TransferWrite), "t-"+caller,
			&transferv1.WriteRequest{Id: open.GetId(), Sequence: uint64(seq), Data: data[seq*chunk : min((seq+1)*chunk, len(data))]},
			&transferv1.WriteResponse{}); e != nil {
			t.Fatalf("write %d: %v", seq, e)
		}
	}
	return open.GetId()
}

// TestReadRequestTakesTheCallersUpload: an upload of this engine's is read once, by its
// own caller only, and is closed by the read, its bytes back in the budget.
func TestReadRequestTakesTheCallersUpload(t *testing.T) {
	srv := smallBroker(t)
	budget := NewBudget(1<<20, 0)
	o := startOverflow(t, connect(t, srv), OverflowConfig{Budget: budget, Tokens: callers{}})
	nc := connect(t, srv)
	data := payload(40 << 10)
	id := openUpload(t, nc, o, "a", data)
	if got := budget.Used(); got != int64(len(data)) {
		t.Fatalf("the budget counts %d bytes for an upload of %d", got, len(data))
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	_, err := o.ReadRequest(ctx, id, "b", nil)
	wantCode(t, err, protocol.PermissionDenied)
	if o.Sessions() != 1 {
		t.Fatalf("another caller's read closed the upload")
	}
	_, err = o.ReadRequest(ctx, "not-an-id", "a", nil)
	wantCode(t, err, protocol.InvalidArgument)

	got, err := o.ReadRequest(ctx, id, "a", nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read the upload: %d bytes, %v", len(got), err)
	}
	if o.Sessions() != 0 || budget.Used() != 0 {
		t.Fatalf("after the read: %d sessions, %d bytes in the budget; want none", o.Sessions(), budget.Used())
	}
	_, err = o.ReadRequest(ctx, id, "a", nil)
	wantCode(t, err, protocol.NotFound)
}

// TestUploadIdleExpires: an upload no call takes is closed after the idle timeout, like
// any session, and gives its bytes back.
func TestUploadIdleExpires(t *testing.T) {
	srv := smallBroker(t)
	clock := newFakeClock()
	budget := NewBudget(1<<20, 0)
	o, err := NewOverflowHost(connect(t, srv), OverflowConfig{Budget: budget, Tokens: callers{}, Clock: clock, LeaseValid: leaseHeld})
	if err != nil {
		t.Fatal(err)
	}
	reapedAt := watchReaps(o.TransferHost)
	spawnAndServe(t, o.TransferHost)
	nc := connect(t, srv)
	id := openUpload(t, nc, o, "a", payload(10<<10))

	clock.Advance(59 * time.Second)
	reapedAt(t, clock.Now())
	if o.Sessions() != 1 {
		t.Fatalf("an upload written 59 s ago expired")
	}
	clock.Advance(2 * time.Second)
	reapedAt(t, clock.Now())
	if o.Sessions() != 0 || budget.Used() != 0 {
		t.Fatalf("after 61 s idle: %d sessions, %d bytes in the budget; want none", o.Sessions(), budget.Used())
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err = o.ReadRequest(ctx, id, "a", nil)
	wantCode(t, err, protocol.NotFound)
}
