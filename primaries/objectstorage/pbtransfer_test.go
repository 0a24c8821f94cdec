package objectstorage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/memory"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

var pbSecret = []byte("the transfer tests' secret, 32 B")

// pbTransfers serves the object_storage transfer host over store, verifying tokens
// signed with pbSecret (none when secret is false).
func pbTransfers(t *testing.T, srv *natstest.Server, store objectstorage.Store, secret bool) *sessions.TransferHost {
	t.Helper()
	var auth sessions.Auth
	if secret {
		v, err := servicetoken.NewVerifier(pbSecret, nil)
		if err != nil {
			t.Fatal(err)
		}
		auth.Tokens = v
	}
	h, err := objectstorage.NewTransferHost(natstest.Connect(t, srv.URL()), store, sessions.NewOwnerID(), func() bool { return true }, nil, auth)
	if err != nil {
		t.Fatal(err)
	}
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	h.Spawn(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close the transfer host: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// pbXfer drives transfers as the Python SDK's transport does: protobuf bodies, its
// token on every exchange, owner-scoped subjects derived from the id.
type pbXfer struct {
	t     *testing.T
	nc    *nats.Conn
	token string
}

func (x pbXfer) as(sub string) pbXfer {
	tok, err := servicetoken.Mint(pbSecret, sub, time.Now(), time.Hour)
	if err != nil {
		x.t.Fatal(err)
	}
	x.token = tok
	return x
}

// raw sends body on the transfer subject of op (and id) and returns the reply, after
// checking it never carries micro's error headers.
func (x pbXfer) raw(op, id string, body []byte) *nats.Msg {
	x.t.Helper()
	prefix := protocol.TransferPrefix(protocol.ObjectStorage)
	subject := sessions.OpenSubject(prefix)
	if op != protocol.TransferOpen {
		owner, _, err := sessions.ParseSessionID(id)
		if err != nil {
			x.t.Fatal(err)
		}
		subject = sessions.OwnerSubject(prefix, owner, op)
	}
	m := nats.NewMsg(subject)
	m.Data = body
	if x.token != "" {
		m.Header.Set(protocol.HeaderAuthToken, x.token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	r, err := x.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		x.t.Fatalf("%s: %v", op, err)
	}
	return r
}

// call sends req and decodes the reply into rep, checking that its Abi-Error-Code
// header matches the error inside it and that micro's error headers are absent.
func (x pbXfer) call(op, id string, req proto.Message, rep withError) *nats.Msg {
	x.t.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		x.t.Fatal(err)
	}
	r := x.raw(op, id, body)
	if r.Header.Get(micro.ErrorHeader) != "" || r.Header.Get(micro.ErrorCodeHeader) != "" {
		x.t.Fatalf("%s: a protobuf reply carries micro's error headers: %v", op, r.Header)
	}
	if err := proto.Unmarshal(r.Data, rep); err != nil {
		x.t.Fatalf("%s: reply %x: %v", op, r.Data, err)
	}
	if got, want := r.Header.Get(protocol.HeaderErrorCode), rep.GetError().GetCode(); got != want {
		x.t.Fatalf("%s: Abi-Error-Code %q, the reply's error %v", op, got, rep.GetError())
	}
	return r
}

func ctx() *commonv1.CallContext {
	return &commonv1.CallContext{TraceId: "0b7c8a64-4a5d-4d7e-9b1a-6b3c2f1e0d9c", TimeoutMs: 10000}
}

func (x pbXfer) open(op, prefix, key string, chunk uint32) *transferv1.OpenResponse {
	x.t.Helper()
	meta, err := proto.Marshal(&osv1.GetObjectRequest{Prefix: prefix, Key: key})
	if err != nil {
		x.t.Fatal(err)
	}
	var rep transferv1.OpenResponse
	x.call(protocol.TransferOpen, "", &transferv1.OpenRequest{Context: ctx(), Operation: op, Metadata: meta, ChunkBytes: chunk}, &rep)
	return &rep
}

func (x pbXfer) write(id string, seq uint64, data []byte) *transferv1.WriteResponse {
	x.t.Helper()
	var rep transferv1.WriteResponse
	x.call(protocol.TransferWrite, id, &transferv1.WriteRequest{Context: ctx(), Id: id, Sequence: seq, Data: data}, &rep)
	return &rep
}

func (x pbXfer) start(id string) *transferv1.StartResponse {
	x.t.Helper()
	var rep transferv1.StartResponse
	x.call(protocol.TransferStart, id, &transferv1.StartRequest{Context: ctx(), Id: id}, &rep)
	return &rep
}

func (x pbXfer) read(id string, seq uint64) *transferv1.ReadResponse {
	x.t.Helper()
	var rep transferv1.ReadResponse
	x.call(protocol.TransferRead, id, &transferv1.ReadRequest{Context: ctx(), Id: id, Sequence: seq}, &rep)
	return &rep
}

func (x pbXfer) close(id string) *transferv1.CloseResponse {
	x.t.Helper()
	var rep transferv1.CloseResponse
	x.call(protocol.TransferClose, id, &transferv1.CloseRequest{Context: ctx(), Id: id}, &rep)
	return &rep
}

// readAll reads a started session as the SDK does: done is checked first and ends
// the stream; data before it is appended. It returns the data and every reply.
func (x pbXfer) readAll(id string) ([]byte, []*transferv1.ReadResponse) {
	x.t.Helper()
	var out []byte
	var reps []*transferv1.ReadResponse
	for seq := uint64(0); seq < 1<<16; seq++ {
		r := x.read(id, seq)
		reps = append(reps, r)
		if r.GetError() != nil {
			x.t.Fatalf("read %d: %v", seq, r.GetError())
		}
		if r.GetSequence() != seq {
			x.t.Fatalf("read %d answered sequence %d", seq, r.GetSequence())
		}
		if r.GetDone() {
			return out, reps
		}
		out = append(out, r.GetData()...)
	}
	x.t.Fatal("the session never said done")
	return nil, nil
}

func wantErr(t *testing.T, what string, e *commonv1.CallError, code protocol.Code, text string) {
	t.Helper()
	if e.GetCode() != string(code) || !strings.Contains(e.GetMessage(), text) {
		t.Errorf("%s: error %v, want %s containing %q", what, e, code, text)
	}
}

// TestProtobufTransferRoundTrip puts an object of three chunks and a bit through a
// protobuf transfer and gets it back: every data reply has done=false (the last one
// frame_end), done comes in its own reply at the next sequence with no data, and a
// read repeated there is done again. Then nothing is left open.
func TestProtobufTransferRoundTrip(t *testing.T) {
	srv := natstest.Start(t)
	store := memory.New()
	h := pbTransfers(t, srv, store, true)
	x := pbXfer{t: t, nc: natstest.Connect(t, srv.URL())}.as("sdk-ci")

	content := bytes.Repeat([]byte("0123456789abcdef"), 3*1024/16+3) // 3 chunks of 1024 and 48 bytes
	put := x.open(protocol.OpTransferPut, "p", "d/big.bin", 1024)
	if put.GetError() != nil || put.GetChunkBytes() != 1024 || !strings.HasPrefix(put.GetId(), h.Owner()+":") {
		t.Fatalf("open put: %v", put)
	}
	for i, seq := 0, uint64(0); i < len(content); i, seq = i+1024, seq+1 {
		if w := x.write(put.GetId(), seq, content[i:min(i+1024, len(content))]); w.GetError() != nil {
			t.Fatalf("write %d: %v", seq, w.GetError())
		}
	}
	if s := x.start(put.GetId()); s.GetError() != nil {
		t.Fatalf("start put: %v", s.GetError())
	}
	if _, reps := x.readAll(put.GetId()); len(reps) != 1 {
		t.Errorf("a put's reads: %d replies, want done at once", len(reps))
	}
	x.close(put.GetId())
	if got, err := store.GetObject(t.Context(), "p/d", "big.bin"); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("stored %d bytes, %v; want %d (the nested key under p/d)", len(got), err, len(content))
	}

	get := x.open(protocol.OpTransferGet, "p", "d/big.bin", 1024)
	if s := x.start(get.GetId()); s.GetError() != nil {
		t.Fatalf("start get: %v", s.GetError())
	}
	got, reps := x.readAll(get.GetId())
	if !bytes.Equal(got, content) {
		t.Fatalf("got %d bytes back, want %d", len(got), len(content))
	}
	if len(reps) != 5 {
		t.Fatalf("%d read replies, want 4 data and 1 done", len(reps))
	}
	for i, r := range reps[:4] {
		if r.GetDone() || len(r.GetData()) == 0 || len(r.GetData()) > 1024 || r.GetFrameEnd() != (i == 3) {
			t.Errorf("data reply %d: done=%v frame_end=%v %d bytes", i, r.GetDone(), r.GetFrameEnd(), len(r.GetData()))
		}
	}
	if last := reps[4]; !last.GetDone() || len(last.GetData()) != 0 || last.GetSequence() != 4 {
		t.Errorf("done reply: %v", last)
	}
	if again := x.read(get.GetId(), 4); !again.GetDone() || again.GetSequence() != 4 {
		t.Errorf("a read repeated after done: %v, want done at 4 again", again)
	}
	if c := x.close(get.GetId()); c.GetError() != nil {
		t.Fatalf("close: %v", c.GetError())
	}
	if c := x.close(get.GetId()); c.GetError() != nil {
		t.Errorf("closing a closed session: %v, want success", c.GetError())
	}
	if n := h.Sessions(); n != 0 {
		t.Errorf("%d sessions open after every close", n)
	}
}

// TestProtobufTransferEmptyAndMissing: a put with no writes stores an empty object,
// whose get is done at its first read; a get of a missing object is OBJECT_NOT_FOUND
// (at start here: the SDK accepts it there or at the first read).
func TestProtobufTransferEmptyAndMissing(t *testing.T) {
	srv := natstest.Start(t)
	store := memory.New()
	h := pbTransfers(t, srv, store, true)
	x := pbXfer{t: t, nc: natstest.Connect(t, srv.URL())}.as("sdk-ci")

	put := x.open(protocol.OpTransferPut, "p", "empty", 0)
	if put.GetChunkBytes() < 1024 {
		t.Fatalf("chunk_bytes 0 negotiated %d, want the host's chunk", put.GetChunkBytes())
	}
	if s := x.start(put.GetId()); s.GetError() != nil {
		t.Fatalf("start: %v", s.GetError())
	}
	x.readAll(put.GetId())
	x.close(put.GetId())
	if got, err := store.GetObject(t.Context(), "p", "empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty object: %q, %v", got, err)
	}

	get := x.open(protocol.OpTransferGet, "p", "empty", 0)
	x.start(get.GetId())
	if r := x.read(get.GetId(), 0); !r.GetDone() || len(r.GetData()) != 0 || r.GetSequence() != 0 {
		t.Errorf("first read of an empty object: %v, want done at 0", r)
	}
	x.close(get.GetId())

	missing := x.open(protocol.OpTransferGet, "p", "nope", 0)
	wantErr(t, "start of a missing object", x.start(missing.GetId()).GetError(), protocol.ObjectNotFound, "")
	x.close(missing.GetId())

	if r := x.open(protocol.OpTransferGet, "p", "x", 512); r.GetId() != "" {
		t.Errorf("chunk_bytes 512 opened %v", r)
	} else {
		wantErr(t, "chunk_bytes 512", r.GetError(), protocol.InvalidArgument, "1024")
	}
	if n := h.Sessions(); n != 0 {
		t.Errorf("%d sessions open after every close", n)
	}
}

// TestProtobufTransferBelongsToItsCaller: a session answers only its opener's `sub`
// (PERMISSION_DENIED for another, having done nothing); a forged or expired token is
// UNAUTHENTICATED having done nothing, an open included; an unknown id closes fine and
// is NOT_FOUND otherwise.
func TestProtobufTransferBelongsToItsCaller(t *testing.T) {
	srv := natstest.Start(t)
	store := memory.New()
	h := pbTransfers(t, srv, store, true)
	base := pbXfer{t: t, nc: natstest.Connect(t, srv.URL())}
	alice, bob := base.as("alice"), base.as("bob")

	put := alice.open(protocol.OpTransferPut, "p", "mine", 0)
	id := put.GetId()
	wantErr(t, "bob's write", bob.write(id, 0, []byte("bob")).GetError(), protocol.PermissionDenied, "Transfer belongs to another caller")
	wantErr(t, "bob's start", bob.start(id).GetError(), protocol.PermissionDenied, "another caller")
	wantErr(t, "bob's read", bob.read(id, 0).GetError(), protocol.PermissionDenied, "another caller")
	wantErr(t, "bob's close", bob.close(id).GetError(), protocol.PermissionDenied, "another caller")

	forged := base
	forged.token = alice.token[:len(alice.token)-4] + "AAAA"
	expired := base
	tok, err := servicetoken.Mint(pbSecret, "alice", time.Now().Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expired.token = tok
	wrong := base
	if wrong.token, err = servicetoken.Mint([]byte("another secret, long enough too!"), "alice", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	none := base
	for name, x := range map[string]pbXfer{"forged": forged, "expired": expired, "wrong secret": wrong, "no token": none} {
		wantErr(t, name+" write", x.write(id, 0, []byte("forged")).GetError(), protocol.Unauthenticated, "Invalid service token")
		wantErr(t, name+" close", x.close(id).GetError(), protocol.Unauthenticated, "Invalid service token")
		wantErr(t, name+" open", x.open(protocol.OpTransferPut, "p", "forged", 0).GetError(), protocol.Unauthenticated, "Invalid service token")
	}

	// Nothing the others sent took effect: alice's upload starts at sequence 0.
	if w := alice.write(id, 0, []byte("alice")); w.GetError() != nil {
		t.Fatalf("alice's first write after the refusals: %v", w.GetError())
	}
	alice.start(id)
	alice.readAll(id)
	if got, err := store.GetObject(t.Context(), "p", "mine"); err != nil || string(got) != "alice" {
		t.Fatalf("stored %q, %v; want alice's bytes only", got, err)
	}
	if _, err := store.GetObject(t.Context(), "p", "forged"); err == nil {
		t.Error("an open with a bad token stored an object")
	}
	alice.close(id)

	unknown := h.Owner() + ":0123456789abcdef0123456789abcdef"
	if c := alice.close(unknown); c.GetError() != nil {
		t.Errorf("close of an unknown session: %v, want success", c.GetError())
	}
	wantErr(t, "read of an unknown session", alice.read(unknown, 0).GetError(), protocol.NotFound, "")
	if n := h.Sessions(); n != 0 {
		t.Errorf("%d sessions open after every close", n)
	}
}

// TestProtobufSessionRefusesJSON: every exchange of a session is in the codec of its
// open; a JSON request on a protobuf session is INVALID_ARGUMENT (in JSON, the
// request's codec) and does nothing.
func TestProtobufSessionRefusesJSON(t *testing.T) {
	srv := natstest.Start(t)
	store := memory.New()
	pbTransfers(t, srv, store, true)
	x := pbXfer{t: t, nc: natstest.Connect(t, srv.URL())}.as("sdk-ci")

	id := x.open(protocol.OpTransferPut, "p", "k", 0).GetId()
	body, err := json.Marshal(protocol.TransferWriteRequest{ID: id, Sequence: 0, Data: []byte("json")})
	if err != nil {
		t.Fatal(err)
	}
	r := x.raw(protocol.TransferWrite, id, body)
	var env protocol.Envelope
	if err := json.Unmarshal(r.Data, &env); err != nil || env.Error == nil || env.Error.Code != protocol.InvalidArgument || !strings.Contains(env.Error.Message, "codec") {
		t.Fatalf("a JSON write on a protobuf session: %s, %v", r.Data, err)
	}
	if w := x.write(id, 0, []byte("pb")); w.GetError() != nil {
		t.Fatalf("the protobuf write after the refused JSON one: %v", w.GetError())
	}
	x.start(id)
	x.readAll(id)
	x.close(id)
	if got, _ := store.GetObject(t.Context(), "p", "k"); string(got) != "pb" {
		t.Errorf("stored %q, want the protobuf write's bytes only", got)
	}
}

// TestProtobufTransferWithoutSecret: an engine that cannot verify tokens refuses
// protobuf transfers UNAUTHENTICATED naming the setting, and opens nothing.
func TestProtobufTransferWithoutSecret(t *testing.T) {
	srv := natstest.Start(t)
	h := pbTransfers(t, srv, memory.New(), false)
	x := pbXfer{t: t, nc: natstest.Connect(t, srv.URL())}.as("sdk-ci")
	wantErr(t, "open", x.open(protocol.OpTransferGet, "p", "k", 0).GetError(), protocol.Unauthenticated, "nats.jwt_secret_file")
	if n := h.Sessions(); n != 0 {
		t.Errorf("%d sessions open", n)
	}
}

// TestJSONTransferBelongsToItsCaller: with a secret, JSON transfers need a token too
// (as every JSON call to a primary does), and a JSON session belongs to its opener's
// `sub` like a protobuf one.
func TestJSONTransferBelongsToItsCaller(t *testing.T) {
	srv := natstest.Start(t)
	store := memory.New()
	h := pbTransfers(t, srv, store, true)
	base := pbXfer{t: t, nc: natstest.Connect(t, srv.URL())}
	alice, bob := base.as("alice"), base.as("bob")
	var openedID string
	jsonCall := func(x pbXfer, op, id string, req any) *protocol.Error {
		t.Helper()
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		r := x.raw(op, id, body)
		var env protocol.Envelope
		if err := json.Unmarshal(r.Data, &env); err != nil {
			t.Fatalf("%s: reply %s: %v", op, r.Data, err)
		}
		if env.Error == nil && op == protocol.TransferOpen {
			var open protocol.TransferOpenReply
			if err := json.Unmarshal(r.Data, &open); err != nil || open.ID == "" {
				t.Fatalf("open: %s, %v", r.Data, err)
			}
			openedID = open.ID
		}
		return env.Error
	}
	meta := json.RawMessage(`{"prefix":"p","key":"j"}`)
	if e := jsonCall(base, protocol.TransferOpen, "", protocol.TransferOpenRequest{Operation: protocol.OpTransferPut, Metadata: meta}); e == nil || e.Code != protocol.Unauthenticated {
		t.Fatalf("a JSON open without a token: %v, want UNAUTHENTICATED", e)
	}
	if n := h.Sessions(); n != 0 {
		t.Fatalf("%d sessions open after a refused open", n)
	}
	if e := jsonCall(alice, protocol.TransferOpen, "", protocol.TransferOpenRequest{Operation: protocol.OpTransferPut, Metadata: meta}); e != nil {
		t.Fatalf("alice's JSON open: %v", e)
	}
	id := openedID
	if e := jsonCall(bob, protocol.TransferWrite, id, protocol.TransferWriteRequest{ID: id, Data: []byte("bob")}); e == nil || e.Code != protocol.PermissionDenied {
		t.Errorf("bob's JSON write: %v, want PERMISSION_DENIED", e)
	}
	if e := jsonCall(bob, protocol.TransferClose, id, protocol.TransferCloseRequest{ID: id}); e == nil || e.Code != protocol.PermissionDenied {
		t.Errorf("bob's JSON close: %v, want PERMISSION_DENIED", e)
	}
	if e := jsonCall(alice, protocol.TransferWrite, id, protocol.TransferWriteRequest{ID: id, Data: []byte("alice")}); e != nil {
		t.Fatalf("alice's first write: %v", e)
	}
	if e := jsonCall(alice, protocol.TransferStart, id, protocol.TransferStartRequest{ID: id}); e != nil {
		t.Fatalf("alice's start: %v", e)
	}
	if e := jsonCall(alice, protocol.TransferClose, id, protocol.TransferCloseRequest{ID: id}); e != nil {
		t.Fatalf("alice's close: %v", e)
	}
	if got, _ := store.GetObject(t.Context(), "p", "j"); string(got) != "alice" {
		t.Errorf("stored %q, want alice's bytes only", got)
	}
}
