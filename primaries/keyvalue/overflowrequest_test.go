package keyvalue_test

import (
	"bytes"
	"context"
	"sync/atomic"
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
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// uploadRig is a broker whose max payload is 64 KiB, the keyvalue primary of engine
// A over a memory store, and overflow hosts: A's own, and B's, a second engine on its
// own connection. Only the hosts named serving take opens, so a test chooses which
// engine holds an upload.
type uploadRig struct {
	srv    *natstest.Server
	store  *memory.Store
	client *nats.Conn
	a, b   *sessions.OverflowHost
	budget *sessions.Budget // A's, and B's unless the test gives B its own
	tok    string           // sub "sdk-ci"
	other  string           // sub "other"
}

type rigOptions struct {
	serveA, serveB bool
	inline         bool  // the primary runs calls on micro's callback, as for a memory store
	limitA, limitB int64 // MaxRequestBytes; 0 the default
	budgetB        *sessions.Budget
	lease          func() bool // the primary's LeaseValid; nil: always confirmed
}

func newUploadRig(t *testing.T, o rigOptions) *uploadRig {
	t.Helper()
	srv := natstest.Start(t, natstest.WithMaxPayload(64<<10))
	r := &uploadRig{srv: srv, store: memory.New(),
		tok: mint(t, testSecret, "sdk-ci", time.Now()), other: mint(t, testSecret, "other", time.Now())}
	r.budget = sessions.NewBudget(64<<20, 0)
	if o.budgetB == nil {
		o.budgetB = r.budget
	}
	r.a = startOverflowHost(t, srv, sessions.NewOwnerID(), o.serveA, o.limitA, r.budget)
	r.b = startOverflowHost(t, srv, sessions.NewOwnerID(), o.serveB, o.limitB, o.budgetB)
	svc := keyvalue.Service(r.store)
	svc.Inline = o.inline
	r.client = serveServiceOn(t, srv, svc, withTokens(t), func(c *primaries.Config) {
		c.InstanceID = r.a.Owner()
		c.Uploads = r.a
		if o.lease != nil {
			c.LeaseValid = o.lease
		}
	})
	return r
}

func startOverflowHost(t *testing.T, srv *natstest.Server, owner string, serve bool, limit int64, budget *sessions.Budget) *sessions.OverflowHost {
	t.Helper()
	v, err := servicetoken.NewVerifier(testSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := sessions.NewOverflowHost(natstest.Connect(t, srv.URL()), sessions.OverflowConfig{
		Owner: owner, MaxRequestBytes: limit, Budget: budget, Tokens: v, LeaseValid: func() bool { return true },
	})
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
			t.Errorf("close overflow host %s: %v", owner, err)
		}
	})
	if serve {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := h.Serve(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// exchange sends a protobuf transfer request on subject as the Python SDK does (token,
// no micro error headers expected) and decodes the reply into rep.
func (r *uploadRig) exchange(t *testing.T, subject, token string, req, rep proto.Message) {
	t.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(protocol.HeaderAuthToken, token)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	got, err := r.client.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if got.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("%s: a protobuf reply carries micro's error headers: %v", subject, got.Header)
	}
	if err := proto.Unmarshal(got.Data, rep); err != nil {
		t.Fatalf("%s: reply %x: %v", subject, got.Data, err)
	}
}

// upload opens an overflow upload with token and writes req into it in chunks of the
// negotiated size, as the SDK does (no start). It returns the id and the error the
// first refused write answered, if any.
func (r *uploadRig) upload(t *testing.T, token string, req proto.Message) (string, *commonv1.CallError) {
	t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var open transferv1.OpenResponse
	r.exchange(t, protocol.TransferOpenSubject(protocol.OverflowPrefix), token,
		&transferv1.OpenRequest{Context: ctxOf(), Operation: protocol.OverflowRequestOperation, ChunkBytes: 32 << 10}, &open)
	if open.GetError() != nil {
		t.Fatalf("open an overflow upload: %v", open.GetError())
	}
	owner, _, err := sessions.ParseSessionID(open.GetId())
	if err != nil {
		t.Fatal(err)
	}
	chunk := int(open.GetChunkBytes())
	for seq := 0; seq*chunk < len(data); seq++ {
		piece := data[seq*chunk : min((seq+1)*chunk, len(data))]
		var w transferv1.WriteResponse
		r.exchange(t, sessions.OwnerSubject(protocol.OverflowPrefix, owner, protocol.TransferWrite), token,
			&transferv1.WriteRequest{Context: ctxOf(), Id: open.GetId(), Sequence: uint64(seq), Data: piece}, &w)
		if w.GetError() != nil {
			return open.GetId(), w.GetError()
		}
	}
	return open.GetId(), nil
}

// call makes the real call: an empty body naming the upload.
func (r *uploadRig) call(t *testing.T, op, token, id string) *nats.Msg {
	t.Helper()
	m := nats.NewMsg(protocol.ServiceSubject(protocol.KeyValue, op))
	if token != "" {
		m.Header.Set(protocol.HeaderAuthToken, token)
	}
	m.Header.Set(protocol.HeaderOverflow, "1")
	m.Header.Set(protocol.HeaderOverflowRequest, id)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rep, err := r.client.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if rep.Header.Get(micro.ErrorHeader) != "" || rep.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("%s: a protobuf reply carries micro's error headers: %v", op, rep.Header)
	}
	return rep
}

// keys counts what the store holds: every refusal must leave it as it was.
func (r *uploadRig) keys(t *testing.T) int {
	t.Helper()
	keys, _, err := r.store.ListKeys(context.Background(), "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

func bigValue() []byte { return bytes.Repeat([]byte("0123456789abcdef"), 192<<10/16) } // 192 KiB

func wantStored(t *testing.T, r *uploadRig, key string, want []byte) {
	t.Helper()
	got, found, err := r.store.Get(context.Background(), key)
	if err != nil || !found || !bytes.Equal(got, want) {
		t.Fatalf("stored %s: %d bytes, found %v, %v; want %d bytes", key, len(got), found, err, len(want))
	}
}

// TestOverflowRequestLocal: a kv set of 192 KiB through an upload the serving engine
// holds itself (wire-contracts §6.3, case g): stored, the upload closed by the call.
func TestOverflowRequestLocal(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "pooled", true: "inline"}[inline], func(t *testing.T) {
			testOverflowRequestLocal(t, newUploadRig(t, rigOptions{serveA: true, inline: inline}))
		})
	}
}

func testOverflowRequestLocal(t *testing.T, r *uploadRig) {
	value := bigValue()
	id, werr := r.upload(t, r.tok, &kvv1.SetRequest{Context: ctxOf(), Key: "big", Value: value})
	if werr != nil {
		t.Fatalf("write: %v", werr)
	}
	rep := r.call(t, protocol.OpSet, r.tok, id)
	wantBytes(t, "set through an upload", rep, "", "")
	wantStored(t, r, "big", value)
	if n, used := r.a.Sessions(), r.budget.Used(); n != 0 || used != 0 {
		t.Errorf("the engine holds %d sessions and %d bytes of its budget after the call; the upload should be closed and released", n, used)
	}
	// The client's own close afterwards finds nothing, which succeeds.
	var closed transferv1.CloseResponse
	r.exchange(t, sessions.OwnerSubject(protocol.OverflowPrefix, r.a.Owner(), protocol.TransferClose), r.tok,
		&transferv1.CloseRequest{Id: id}, &closed)
	if closed.GetError() != nil {
		t.Errorf("the client's close: %v", closed.GetError())
	}
}

// TestOverflowRequestOwnerScoped: the upload is held by engine B; engine A serving the
// call fetches it over B's owner-scoped subjects with the caller's token, then B holds
// nothing.
func TestOverflowRequestOwnerScoped(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "pooled", true: "inline"}[inline], func(t *testing.T) {
			testOverflowRequestOwnerScoped(t, newUploadRig(t, rigOptions{serveB: true, inline: inline}))
		})
	}
}

func testOverflowRequestOwnerScoped(t *testing.T, r *uploadRig) {
	value := bigValue()
	id, werr := r.upload(t, r.tok, &kvv1.SetRequest{Context: ctxOf(), Key: "big", Value: value})
	if werr != nil {
		t.Fatalf("write: %v", werr)
	}
	if owner, _, _ := sessions.ParseSessionID(id); owner != r.b.Owner() {
		t.Fatalf("upload %s is not engine B's (%s)", id, r.b.Owner())
	}
	wantBytes(t, "set through engine B's upload", r.call(t, protocol.OpSet, r.tok, id), "", "")
	wantStored(t, r, "big", value)
	if n, used := r.b.Sessions(), r.budget.Used(); n != 0 || used != 0 {
		t.Errorf("engine B holds %d sessions, and the engines %d bytes of their budget, after the call; the fetch should have closed the upload and the call released it", n, used)
	}
}

// TestOverflowRequestRefusals: every refusal answers its code and stores nothing.
func TestOverflowRequestRefusals(t *testing.T) {
	set := func(key string) *kvv1.SetRequest {
		return &kvv1.SetRequest{Context: ctxOf(), Key: key, Value: bigValue()}
	}
	t.Run("owner gone", func(t *testing.T) {
		r := newUploadRig(t, rigOptions{serveB: true})
		id, werr := r.upload(t, r.tok, set("gone"))
		if werr != nil {
			t.Fatal(werr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := r.b.Close(ctx); err != nil {
			t.Fatal(err)
		}
		wantError(t, r.call(t, protocol.OpSet, r.tok, id), &kvv1.SetResponse{}, protocol.NotFound, "The overflow upload's owner is gone")
		if n := r.keys(t); n != 0 {
			t.Errorf("%d keys stored", n)
		}
	})
	for _, remote := range []bool{false, true} {
		where := map[bool]string{false: "local", true: "remote"}[remote]
		t.Run("another caller's upload, "+where, func(t *testing.T) {
			r := newUploadRig(t, rigOptions{serveA: !remote, serveB: remote})
			id, werr := r.upload(t, r.other, set("theirs"))
			if werr != nil {
				t.Fatal(werr)
			}
			wantError(t, r.call(t, protocol.OpSet, r.tok, id), &kvv1.SetResponse{}, protocol.PermissionDenied, "Transfer belongs to another caller")
			if n := r.keys(t); n != 0 {
				t.Errorf("%d keys stored", n)
			}
			// The refusal leaves the other caller's upload alone: its owner still uses it.
			wantBytes(t, "the owner's own call", r.call(t, protocol.OpSet, r.other, id), "", "")
			wantStored(t, r, "theirs", bigValue())
		})
		t.Run("no token, "+where, func(t *testing.T) {
			r := newUploadRig(t, rigOptions{serveA: !remote, serveB: remote})
			id, werr := r.upload(t, r.tok, set("k"))
			if werr != nil {
				t.Fatal(werr)
			}
			wantError(t, r.call(t, protocol.OpSet, "", id), &kvv1.SetResponse{}, protocol.Unauthenticated, "missing or invalid auth token")
			if n := r.keys(t); n != 0 {
				t.Errorf("%d keys stored", n)
			}
			if n := r.a.Sessions() + r.b.Sessions(); n != 1 {
				t.Errorf("%d uploads open after a refused call; the upload should be untouched", n)
			}
		})
	}
	t.Run("upload beyond the cap", func(t *testing.T) {
		r := newUploadRig(t, rigOptions{serveA: true, limitA: 128 << 10})
		_, werr := r.upload(t, r.tok, set("k"))
		if werr.GetCode() != string(protocol.PayloadTooLarge) {
			t.Fatalf("write beyond the cap: %v, want PAYLOAD_TOO_LARGE", werr)
		}
		if n := r.keys(t); n != 0 {
			t.Errorf("%d keys stored", n)
		}
	})
	t.Run("fetched upload beyond the reader's cap", func(t *testing.T) {
		// B takes 256 KiB uploads; A, which serves the call, reads at most 128 KiB.
		r := newUploadRig(t, rigOptions{serveB: true, limitA: 128 << 10, limitB: 256 << 10})
		id, werr := r.upload(t, r.tok, set("k"))
		if werr != nil {
			t.Fatal(werr)
		}
		wantError(t, r.call(t, protocol.OpSet, r.tok, id), &kvv1.SetResponse{}, protocol.PayloadTooLarge, "Request exceeds the overflow value limit")
		if n := r.keys(t); n != 0 {
			t.Errorf("%d keys stored", n)
		}
		if n := r.b.Sessions(); n != 0 {
			t.Errorf("engine B holds %d sessions; the refused fetch should have closed the upload", n)
		}
	})
	t.Run("budget shared with the sessions", func(t *testing.T) {
		r := newUploadRig(t, rigOptions{serveB: true, budgetB: sessions.NewBudget(128<<10, 0)})
		_, werr := r.upload(t, r.tok, set("k"))
		if werr.GetCode() != string(protocol.ResourceExhausted) {
			t.Fatalf("write beyond the budget: %v, want RESOURCE_EXHAUSTED", werr)
		}
		if n := r.keys(t); n != 0 {
			t.Errorf("%d keys stored", n)
		}
	})
	t.Run("an upload opened in JSON", func(t *testing.T) {
		r := newUploadRig(t, rigOptions{serveA: true})
		m := nats.NewMsg(protocol.TransferOpenSubject(protocol.OverflowPrefix))
		m.Header.Set(protocol.HeaderAuthToken, r.tok)
		m.Data = []byte(`{"operation":"request"}`)
		rep, err := r.client.RequestMsg(m, callTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if code := rep.Header.Get(protocol.HeaderErrorCode); code != string(protocol.InvalidArgument) || !bytes.Contains(rep.Data, []byte("opened in protobuf")) {
			t.Errorf("JSON open of an upload answered %s %s, want INVALID_ARGUMENT", code, rep.Data)
		}
		if n := r.a.Sessions(); n != 0 {
			t.Errorf("%d sessions open after a refused open", n)
		}
	})
	t.Run("a body beside the header", func(t *testing.T) {
		r := newUploadRig(t, rigOptions{serveA: true})
		id, werr := r.upload(t, r.tok, set("k"))
		if werr != nil {
			t.Fatal(werr)
		}
		m := nats.NewMsg(protocol.ServiceSubject(protocol.KeyValue, protocol.OpSet))
		m.Header.Set(protocol.HeaderAuthToken, r.tok)
		m.Header.Set(protocol.HeaderOverflowRequest, id)
		m.Data = []byte(`{"key":"k","value":"dg=="}`) // JSON: still the protobuf protocol
		rep, err := r.client.RequestMsg(m, callTimeout)
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, rep, &kvv1.SetResponse{}, protocol.InvalidArgument, "must have an empty body")
		if n := r.keys(t); n != 0 {
			t.Errorf("%d keys stored", n)
		}
	})
}

// TestOverflowRequestLeaseLostWhileReading: the lease is confirmed when the call
// arrives and no longer once its upload is read (a fetch may take seconds): the call
// runs nothing and is refused UNAVAILABLE, and the upload's bytes leave the budget.
func TestOverflowRequestLeaseLostWhileReading(t *testing.T) {
	var checks atomic.Int32
	r := newUploadRig(t, rigOptions{serveA: true, lease: func() bool { return checks.Add(1) == 1 }})
	id, werr := r.upload(t, r.tok, &kvv1.SetRequest{Context: ctxOf(), Key: "big", Value: bigValue()})
	if werr != nil {
		t.Fatalf("write: %v", werr)
	}
	rep := r.call(t, protocol.OpSet, r.tok, id)
	if got := rep.Header.Get(protocol.HeaderErrorCode); got != string(protocol.Unavailable) {
		t.Errorf("set through an upload read after the lease lapsed: Abi-Error-Code %q, want %s", got, protocol.Unavailable)
	}
	if n := r.keys(t); n != 0 {
		t.Errorf("the store holds %d keys; a call refused for its lease must run nothing", n)
	}
	if used := r.budget.Used(); used != 0 {
		t.Errorf("%d bytes of the budget still held after the refusal", used)
	}
}
