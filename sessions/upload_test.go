package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/testwait"
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

	_, _, err := o.ReadRequest(ctx, id, "b", nil)
	wantCode(t, err, protocol.PermissionDenied)
	if o.Sessions() != 1 {
		t.Fatalf("another caller's read closed the upload")
	}
	_, _, err = o.ReadRequest(ctx, "not-an-id", "a", nil)
	wantCode(t, err, protocol.InvalidArgument)

	got, release, err := o.ReadRequest(ctx, id, "a", nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read the upload: %d bytes, %v", len(got), err)
	}
	// The session is gone, its bytes the call's until it releases them. The host hands
	// the upload over before it publishes its view without the session, so the count
	// may lag the read by a moment.
	testwait.For(t, 10*time.Second, "the taken upload's session gone from the view", func() bool { return o.Sessions() == 0 })
	if budget.Used() != int64(len(data)) {
		t.Fatalf("after the read: %d bytes in the budget; want %d", budget.Used(), len(data))
	}
	release()
	release()
	if budget.Used() != 0 {
		t.Fatalf("after the release: %d bytes in the budget", budget.Used())
	}
	_, _, err = o.ReadRequest(ctx, id, "a", nil)
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

	handled(t, o.TransferHost)
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
	_, _, err = o.ReadRequest(ctx, id, "a", nil)
	wantCode(t, err, protocol.NotFound)
}

// TestReadRequestFetchesIntoTheBudget: an upload of another engine's is fetched into
// this engine's budget, held until the call releases it, and refused
// RESOURCE_EXHAUSTED when the budget cannot hold it; the owner holds nothing after
// either.
func TestReadRequestFetchesIntoTheBudget(t *testing.T) {
	srv := smallBroker(t)
	owner := startOverflow(t, connect(t, srv), OverflowConfig{Tokens: callers{}})
	small := NewBudget(32<<10, 0)
	reader, err := NewOverflowHost(connect(t, srv), OverflowConfig{Budget: small, Tokens: callers{}, LeaseValid: leaseHeld})
	if err != nil {
		t.Fatal(err)
	}
	nc := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	token := nats.Header{protocol.HeaderAuthToken: {"t-a"}}

	fits := payload(20 << 10)
	id := openUpload(t, nc, owner, "a", fits)
	got, release, err := reader.ReadRequest(ctx, id, "a", token)
	if err != nil || !bytes.Equal(got, fits) {
		t.Fatalf("fetch: %d bytes, %v", len(got), err)
	}
	if small.Used() != int64(len(fits)) || owner.Sessions() != 0 {
		t.Fatalf("after the fetch: %d bytes in the reader's budget, %d sessions on the owner; want %d and none", small.Used(), owner.Sessions(), len(fits))
	}
	// While the first call holds its bytes, a second upload does not fit.
	id = openUpload(t, nc, owner, "a", fits)
	_, _, err = reader.ReadRequest(ctx, id, "a", token)
	wantCode(t, err, protocol.ResourceExhausted)
	if small.Used() != int64(len(fits)) || owner.Sessions() != 0 {
		t.Fatalf("after the refused fetch: %d bytes in the reader's budget, %d sessions on the owner", small.Used(), owner.Sessions())
	}
	release()
	if small.Used() != 0 {
		t.Fatalf("after the release: %d bytes in the budget", small.Used())
	}
}

// TestTakeOfACrashedUpload: an upload whose session actor crashed lost its bytes; the
// call naming it is NOT_FOUND, and the budget gets every byte back whichever way the
// take met the crash (before the host closed the session, or after).
func TestTakeOfACrashedUpload(t *testing.T) {
	srv := smallBroker(t)
	budget := NewBudget(1<<20, 0)
	o := startOverflow(t, connect(t, srv), OverflowConfig{Budget: budget, Tokens: callers{}})
	id := openUpload(t, connect(t, srv), o, "a", payload(20<<10))
	engineOf(o.TransferHost).Send(o.SessionPID(id), actors.Kill{Reason: "chaos"})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, _, err := o.ReadRequest(ctx, id, "a", nil)
	wantCode(t, err, protocol.NotFound)
	// The host gives the bytes back as it closes the session, and publishes that the
	// session is gone once that is done.
	testwait.For(t, 10*time.Second, "the budget back to empty and the session closed", func() bool {
		return budget.Used() == 0 && o.Sessions() == 0
	})
}

// TestAbandonedTakeGivesTheBytesBack: a call that gives up waiting for its upload
// (its context ended) leaves nothing held: whichever of the call and the session actor
// finds the answer gives the bytes back.
func TestAbandonedTakeGivesTheBytesBack(t *testing.T) {
	srv := smallBroker(t)
	budget := NewBudget(1<<20, 0)
	o := startOverflow(t, connect(t, srv), OverflowConfig{Budget: budget, Tokens: callers{}})
	nc := connect(t, srv)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		id := openUpload(t, nc, o, "a", payload(4<<10))
		_, release, err := o.ReadRequest(gone, id, "a", nil)
		if err == nil {
			release() // the answer won the race with the ended context
		} else {
			wantCode(t, err, protocol.Unavailable) // cancelled, as when the engine stops: nothing ran
		}
		// The bytes may come back before the host publishes its view without the
		// session (it hands the upload over first): both are waited for.
		testwait.For(t, 10*time.Second, fmt.Sprintf("take %d: the budget back to empty and no session left", i), func() bool {
			return budget.Used() == 0 && o.Sessions() == 0
		})
	}
}
