package keyvalue_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/memory"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// overflowHost serves an overflow host verifying testSecret's tokens on srv.
func overflowHost(t *testing.T, srv *natstest.Server) *sessions.OverflowHost {
	t.Helper()
	v, err := servicetoken.NewVerifier(testSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := sessions.NewOverflowHost(natstest.Connect(t, srv.URL()), sessions.OverflowConfig{LeaseValid: func() bool { return true }, Tokens: v})
	if err != nil {
		t.Fatal(err)
	}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	o.Spawn(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			t.Errorf("close the overflow host: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := o.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	return o
}

// overflowCall is one exchange with the overflow host in protobuf, as the Python
// SDK reads a parked reply: on abi.rpc.overflow.<owner>.<op>, with its token.
func overflowCall(t *testing.T, nc *nats.Conn, op, id, token string, req proto.Message, rep proto.Message) *nats.Msg {
	t.Helper()
	owner, _, err := sessions.ParseSessionID(id)
	if err != nil {
		t.Fatalf("parked reply id %q: %v", id, err)
	}
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(sessions.OwnerSubject(protocol.OverflowPrefix, owner, op))
	m.Data = body
	m.Header.Set(protocol.HeaderAuthToken, token)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("overflow %s: %v", op, err)
	}
	if r.Header.Get(micro.ErrorHeader) != "" || r.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("overflow %s: micro's error headers on a protobuf reply: %v", op, r.Header)
	}
	if err := proto.Unmarshal(r.Data, rep); err != nil {
		t.Fatalf("overflow %s: reply %x: %v", op, r.Data, err)
	}
	return r
}

// TestProtobufParkedReply: on a broker whose max payload is 64 KiB, a protobuf get of
// a 192 KiB value (with Abi-Overflow: 1, as the Python clients send) is parked: an
// empty body and exactly the headers Abi-Overflow-Reply and Abi-Overflow-Size (and the
// instance's), no Abi-Error-Code. The caller reads it without a start, in protobuf,
// until done (its own reply), gets the announced size and the serialized response,
// and closes it; another caller may not read it; nothing is left on the host.
func TestProtobufParkedReply(t *testing.T) {
	srv := natstest.Start(t, natstest.WithMaxPayload(64<<10))
	o := overflowHost(t, srv)
	store := memory.New()
	nc := serveServiceOn(t, srv, keyvalue.Service(store), withTokens(t), func(c *primaries.Config) { c.Overflow = o })
	value := bytes.Repeat([]byte("0123456789abcdef"), 192<<10/16)
	if err := store.Set(context.Background(), "big", value, 0); err != nil {
		t.Fatal(err)
	}
	tok := mint(t, testSecret, "sdk-ci", time.Now())

	notice := pbCall(t, nc, protocol.OpGet, tok, &kvv1.GetRequest{Context: ctxOf(), Key: "big"})
	if len(notice.Data) != 0 {
		t.Errorf("the notice has a %d-byte body, want none", len(notice.Data))
	}
	for k := range notice.Header {
		switch k {
		case protocol.HeaderOverflowReply, protocol.HeaderOverflowSize, protocol.HeaderInstance:
		default:
			t.Errorf("the notice carries header %s: %v", k, notice.Header[k])
		}
	}
	id := notice.Header.Get(protocol.HeaderOverflowReply)
	size, err := strconv.Atoi(notice.Header.Get(protocol.HeaderOverflowSize))
	if err != nil || id == "" {
		t.Fatalf("notice headers %v: %v", notice.Header, err)
	}

	other := mint(t, testSecret, "someone-else", time.Now())
	var denied transferv1.ReadResponse
	overflowCall(t, nc, protocol.TransferRead, id, other, &transferv1.ReadRequest{Context: ctxOf(), Id: id}, &denied)
	if denied.GetError().GetCode() != string(protocol.PermissionDenied) {
		t.Errorf("another caller's read: %v, want PERMISSION_DENIED", denied.GetError())
	}

	var got []byte
	for seq := uint64(0); ; seq++ {
		var r transferv1.ReadResponse
		overflowCall(t, nc, protocol.TransferRead, id, tok, &transferv1.ReadRequest{Context: ctxOf(), Id: id, Sequence: seq}, &r)
		if r.GetError() != nil || r.GetSequence() != seq {
			t.Fatalf("read %d: %v", seq, &r)
		}
		if r.GetDone() {
			if len(r.GetData()) != 0 {
				t.Errorf("the done reply carries %d bytes", len(r.GetData()))
			}
			break
		}
		if len(r.GetData()) == 0 || len(r.GetData()) > 32<<10 {
			t.Fatalf("read %d: %d bytes, above half the max payload or none", seq, len(r.GetData()))
		}
		got = append(got, r.GetData()...)
	}
	if len(got) != size {
		t.Fatalf("read %d bytes, announced %d", len(got), size)
	}
	var rep kvv1.GetResponse
	if err := proto.Unmarshal(got, &rep); err != nil || !bytes.Equal(rep.GetValue(), value) {
		t.Fatalf("the parked reply decodes to %d bytes of value, %v", len(rep.GetValue()), err)
	}
	for range 2 { // close is idempotent
		var c transferv1.CloseResponse
		overflowCall(t, nc, protocol.TransferClose, id, tok, &transferv1.CloseRequest{Context: ctxOf(), Id: id}, &c)
		if c.GetError() != nil {
			t.Errorf("close: %v", c.GetError())
		}
	}
	if n := o.Sessions(); n != 0 {
		t.Errorf("the overflow host holds %d sessions after the close", n)
	}
}

// TestJSONParkedReplyBelongsToItsCaller: a JSON reply parked for a caller with a
// token is that caller's: another token's read is PERMISSION_DENIED; the caller reads
// and closes it as before.
func TestJSONParkedReplyBelongsToItsCaller(t *testing.T) {
	srv := natstest.Start(t, natstest.WithMaxPayload(64<<10))
	o := overflowHost(t, srv)
	store := memory.New()
	nc := serveServiceOn(t, srv, keyvalue.Service(store), withTokens(t), func(c *primaries.Config) { c.Overflow = o })
	if err := store.Set(context.Background(), "big", bytes.Repeat([]byte{'j'}, 100<<10), 0); err != nil {
		t.Fatal(err)
	}
	jsonReq := func(subject, token string, body string) *nats.Msg {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Data = []byte(body)
		m.Header.Set(protocol.HeaderAuthToken, token)
		m.Header.Set(protocol.HeaderOverflow, "1")
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		r, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	alice, bob := mint(t, testSecret, "alice", time.Now()), mint(t, testSecret, "bob", time.Now())
	notice := jsonReq(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet), alice, `{"key":"big"}`)
	id := notice.Header.Get(protocol.HeaderOverflowReply)
	owner, _, err := sessions.ParseSessionID(id)
	if err != nil {
		t.Fatalf("notice %.200s %v: %v", notice.Data, notice.Header, err)
	}
	read := sessions.OwnerSubject(protocol.OverflowPrefix, owner, protocol.TransferRead)
	if r := jsonReq(read, bob, `{"id":"`+id+`","sequence":0}`); r.Header.Get(protocol.HeaderErrorCode) != string(protocol.PermissionDenied) {
		t.Errorf("bob's read of alice's parked reply: %d bytes, headers %v; want PERMISSION_DENIED", len(r.Data), r.Header)
	}
	if r := jsonReq(read, alice, `{"id":"`+id+`","sequence":0}`); r.Header.Get(protocol.HeaderErrorCode) != "" {
		t.Errorf("alice's read: %.200s", r.Data)
	}
	jsonReq(sessions.OwnerSubject(protocol.OverflowPrefix, owner, protocol.TransferClose), alice, `{"id":"`+id+`"}`)
	if n := o.Sessions(); n != 0 {
		t.Errorf("%d parked replies left", n)
	}
}
