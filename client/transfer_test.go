package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// A broker of 16 KiB: chunks of at most 8 KiB, so a 200 KiB object takes 25 of them.
const smallMaxPayload = 16 << 10

var objectPrefix = protocol.TransferPrefix(protocol.ObjectStorage)

func smallBroker(t *testing.T) *natstest.Server {
	return natstest.Start(t, natstest.WithoutJetStream(), natstest.WithMaxPayload(smallMaxPayload))
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// objectEngine plays an engine serving object_storage the way the engine's primaries
// do: put_object and get_object on queue subscriptions, get_object answered through a
// real sessions.OverflowHost, and a real sessions.TransferHost serving the transfer
// operations put and get over the same objects.
type objectEngine struct {
	t         *testing.T
	transfers *sessions.TransferHost
	overflow  *sessions.OverflowHost

	mu        sync.Mutex
	objects   map[string][]byte
	calls     map[string]int // by operation: put_object, get_object, put, get
	overflows []string       // the Abi-Overflow header of each get_object request
}

// newObjectEngine spawns both hosts on their own connections to srv and serves the
// overflow host and the unary operations; the transfer host is served by the caller.
func newObjectEngine(t *testing.T, srv *natstest.Server, tcfg sessions.TransferConfig, ocfg sessions.OverflowConfig) *objectEngine {
	t.Helper()
	e := &objectEngine{t: t, objects: map[string][]byte{}, calls: map[string]int{}}
	eng, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	tcfg.Prefix = objectPrefix
	tcfg.Handlers = map[string]sessions.Handler{"put": e.transferPut, "get": e.transferGet}
	tcfg.LeaseValid = func() bool { return true }
	ocfg.LeaseValid = tcfg.LeaseValid
	if e.transfers, err = sessions.NewTransferHost(natstest.Connect(t, srv.URL()), tcfg); err != nil {
		t.Fatal(err)
	}
	if e.overflow, err = sessions.NewOverflowHost(natstest.Connect(t, srv.URL()), ocfg); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*sessions.TransferHost{e.transfers, e.overflow.TransferHost} {
		h.Spawn(eng)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := h.Close(ctx); err != nil {
				t.Errorf("close %s: %v", h.Prefix(), err)
			}
		})
	}
	serve(t, e.overflow.TransferHost)

	nc := natstest.Connect(t, srv.URL())
	subscribe := func(op string, h func(*nats.Msg)) {
		if _, err := nc.QueueSubscribe(protocol.ServiceSubject(protocol.ObjectStorage, op), "q", h); err != nil {
			t.Fatal(err)
		}
	}
	subscribe(protocol.OpPutObject, func(m *nats.Msg) {
		var r protocol.PutObjectRequest
		if err := json.Unmarshal(m.Data, &r); err != nil {
			replyError(t, m, protocol.Errorf(protocol.InvalidArgument, "%v", err))
			return
		}
		e.mu.Lock()
		e.calls[protocol.OpPutObject]++
		e.objects[r.Prefix+"/"+r.Key] = r.Content
		e.mu.Unlock()
		reply(t, m, []byte("{}"))
	})
	subscribe(protocol.OpGetObject, func(m *nats.Msg) {
		var r protocol.ObjectRequest
		if err := json.Unmarshal(m.Data, &r); err != nil {
			replyError(t, m, protocol.Errorf(protocol.InvalidArgument, "%v", err))
			return
		}
		e.mu.Lock()
		e.calls[protocol.OpGetObject]++
		e.overflows = append(e.overflows, m.Header.Get(protocol.HeaderOverflow))
		content, ok := e.objects[r.Prefix+"/"+r.Key]
		e.mu.Unlock()
		if !ok {
			replyError(t, m, protocol.Errorf(protocol.NotFound, "no object %q/%q", r.Prefix, r.Key))
			return
		}
		body, err := json.Marshal(protocol.GetObjectReply{Content: content})
		if err != nil {
			t.Error(err)
			return
		}
		if err := e.overflow.Reply(context.Background(), m, body, nil); err != nil {
			t.Errorf("overflow reply: %v", err)
		}
	})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return e
}

// startObjectEngine is newObjectEngine with the transfer host serving too.
func startObjectEngine(t *testing.T, srv *natstest.Server, tcfg sessions.TransferConfig, ocfg sessions.OverflowConfig) *objectEngine {
	e := newObjectEngine(t, srv, tcfg, ocfg)
	serve(t, e.transfers)
	return e
}

func serve(t *testing.T, h *sessions.TransferHost) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
}

// objectKey decodes a transfer's metadata, which must be exactly {"prefix", "key"}.
func objectKey(req sessions.TransferRequest) (string, error) {
	var m map[string]string
	if err := json.Unmarshal(req.Metadata, &m); err != nil || len(m) != 2 || m["key"] == "" {
		return "", protocol.Errorf(protocol.InvalidArgument, "metadata %s is not {prefix, key}", req.Metadata)
	}
	if _, ok := m["prefix"]; !ok {
		return "", protocol.Errorf(protocol.InvalidArgument, "metadata %s has no prefix", req.Metadata)
	}
	return m["prefix"] + "/" + m["key"], nil
}

func (e *objectEngine) transferPut(_ context.Context, req sessions.TransferRequest) ([]byte, error) {
	k, err := objectKey(req)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls["put"]++
	e.objects[k] = req.Upload
	return nil, nil
}

func (e *objectEngine) transferGet(_ context.Context, req sessions.TransferRequest) ([]byte, error) {
	k, err := objectKey(req)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls["get"]++
	v, ok := e.objects[k]
	if !ok {
		return nil, protocol.Errorf(protocol.NotFound, "no object %s", k)
	}
	return v, nil
}

func (e *objectEngine) put(prefix, key string, content []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.objects[prefix+"/"+key] = content
}

func (e *objectEngine) object(prefix, key string) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.objects[prefix+"/"+key]
}

func (e *objectEngine) count(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[op]
}

// wantNoSessions checks that every session was closed: a client close answers after
// the session left the registry, so nothing is left once the call has returned.
func (e *objectEngine) wantNoSessions(t *testing.T) {
	t.Helper()
	if n, m := e.transfers.Sessions(), e.overflow.Sessions(); n != 0 || m != 0 {
		t.Fatalf("%d transfer sessions and %d parked replies left open", n, m)
	}
}

// recordingConn is the client's connection, recording every request it sends, with a
// hook that runs before one is sent.
type recordingConn struct {
	*nats.Conn
	mu     sync.Mutex
	sent   []*nats.Msg
	before func(m *nats.Msg, n int) // n: the number of earlier requests on m's subject
}

func (c *recordingConn) setBefore(f func(m *nats.Msg, n int)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.before = f
}

func (c *recordingConn) RequestMsgWithContext(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
	c.mu.Lock()
	n := 0
	for _, s := range c.sent {
		if s.Subject == m.Subject {
			n++
		}
	}
	c.sent = append(c.sent, m)
	before := c.before
	c.mu.Unlock()
	if before != nil {
		before(m, n)
	}
	return c.Conn.RequestMsgWithContext(ctx, m)
}

// ops returns the last element of each subject sent since the last call, with
// "transfer." or "overflow." in front of a transfer's, and forgets them.
func (c *recordingConn) ops() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.sent {
		op := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		switch {
		case strings.HasPrefix(m.Subject, objectPrefix+"."):
			op = "transfer." + op
		case strings.HasPrefix(m.Subject, protocol.OverflowPrefix+"."):
			op = "overflow." + op
		}
		if len(out) > 0 && out[len(out)-1] == op+"×" {
			continue
		}
		if len(out) > 0 && out[len(out)-1] == op && (strings.HasSuffix(op, ".write") || strings.HasSuffix(op, ".read") || strings.HasSuffix(op, ".open")) {
			out[len(out)-1] = op + "×"
			continue
		}
		out = append(out, op)
	}
	c.sent = nil
	return out
}

func (c *recordingConn) messages() []*nats.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*nats.Msg(nil), c.sent...)
}

func recordingTransport(t *testing.T, srv *natstest.Server, opts ...Option) (*Transport, *recordingConn) {
	t.Helper()
	rc := &recordingConn{Conn: natstest.Connect(t, srv.URL())}
	tr, err := newTransport(rc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr, rc
}

func equalOps(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func wantCode(t *testing.T, err error, code protocol.Code) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("err = %v, want a %s error", err, code)
	}
	return pe
}

// A 200 KiB object on a 16 KiB broker: put by transfer, got as a parked reply, and
// downloaded by transfer on request.
func TestLargeObjectRoundTrips(t *testing.T) {
	srv := smallBroker(t)
	e := startObjectEngine(t, srv, sessions.TransferConfig{}, sessions.OverflowConfig{})
	tr, rc := recordingTransport(t, srv)
	objs := NewObjectStorage(tr)
	ctx := withTimeout(t, 20*time.Second)
	big := pattern(200 << 10)

	if err := objs.PutObject(ctx, "p", "big", big); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	if !bytes.Equal(e.object("p", "big"), big) {
		t.Fatalf("the engine stored %d bytes, want the %d put", len(e.object("p", "big")), len(big))
	}
	// An upload produces nothing, so there is nothing to read.
	if ops := rc.ops(); !equalOps(ops, "transfer.open", "transfer.write×", "transfer.start", "transfer.close") || e.count(protocol.OpPutObject) != 0 {
		t.Fatalf("PutObject sent %v and %d put_object calls, want one transfer", ops, e.count(protocol.OpPutObject))
	}
	e.wantNoSessions(t)

	got, err := objs.GetObject(ctx, "p", "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("GetObject = %d bytes, %v; want the %d put", len(got), err, len(big))
	}
	if ops := rc.ops(); !equalOps(ops, protocol.OpGetObject, "overflow.read×", "overflow.close") {
		t.Fatalf("GetObject sent %v, want get_object and the parked reply's reads", ops)
	}
	e.wantNoSessions(t)

	got, err = objs.DownloadObject(ctx, "p", "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("DownloadObject = %d bytes, %v", len(got), err)
	}
	if ops := rc.ops(); !equalOps(ops, "transfer.open", "transfer.start", "transfer.read×", "transfer.close") || e.count("get") != 1 {
		t.Fatalf("DownloadObject sent %v, want one transfer", ops)
	}
	e.wantNoSessions(t)

	// What fits one message goes as one.
	small := pattern(4 << 10)
	if err := objs.PutObject(ctx, "p", "small", small); err != nil {
		t.Fatal(err)
	}
	if got, err := objs.GetObject(ctx, "p", "small"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("GetObject small = %d bytes, %v", len(got), err)
	}
	if ops := rc.ops(); !equalOps(ops, protocol.OpPutObject, protocol.OpGetObject) {
		t.Fatalf("small object sent %v", ops)
	}
	// An empty object by transfer is empty, not nil.
	e.put("p", "empty", nil)
	if got, err := objs.DownloadObject(ctx, "p", "empty"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("DownloadObject empty = %#v, %v", got, err)
	}

	e.mu.Lock()
	overflows := e.overflows
	e.mu.Unlock()
	for _, h := range overflows {
		if h != "1" {
			t.Fatalf("get_object requests carried %s %q, want 1 on every one", protocol.HeaderOverflow, overflows)
		}
	}
	if st := tr.Counters().Snapshot(); st.Calls != 6 || st.Retries != 0 || sum(st.Failures) != 0 {
		t.Fatalf("stats = %+v, want 6 calls and nothing else", st)
	}
}

func sum(m map[protocol.Code]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

// An engine that cannot park the reply answers PAYLOAD_TOO_LARGE; get_object only
// reads, so the client downloads the object by transfer instead.
func TestGetObjectFallsBackToATransfer(t *testing.T) {
	srv := smallBroker(t)
	e := startObjectEngine(t, srv, sessions.TransferConfig{}, sessions.OverflowConfig{MaxReplyBytes: 64 << 10})
	tr, rc := recordingTransport(t, srv)
	big := pattern(200 << 10)
	e.put("p", "big", big)

	got, err := NewObjectStorage(tr).GetObject(withTimeout(t, 20*time.Second), "p", "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("GetObject = %d bytes, %v", len(got), err)
	}
	if ops := rc.ops(); !equalOps(ops, protocol.OpGetObject, "transfer.open", "transfer.start", "transfer.read×", "transfer.close") {
		t.Fatalf("GetObject sent %v, want get_object, then a transfer", ops)
	}
	e.wantNoSessions(t)
	if st := tr.Counters().Snapshot(); st.Failures[protocol.PayloadTooLarge] != 1 {
		t.Fatalf("stats = %+v, want the refused get_object counted", st)
	}
}

// Any call that says it can take a parked reply gets it whole; a call that does not
// gets PAYLOAD_TOO_LARGE, which nothing resends.
func TestParkedRepliesAreFetchedTransparently(t *testing.T) {
	srv := smallBroker(t)
	e := startObjectEngine(t, srv, sessions.TransferConfig{}, sessions.OverflowConfig{})
	tr, rc := recordingTransport(t, srv)
	nc := natstest.Connect(t, srv.URL())
	big := pattern(3 * smallMaxPayload)
	const subject = "abi.svc.document.v1.get"
	if _, err := nc.QueueSubscribe(subject, "q", func(m *nats.Msg) {
		if err := e.overflow.Reply(context.Background(), m, big, nats.Header{"X-Kept": []string{"yes"}}); err != nil {
			t.Errorf("reply: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	value := pattern(40 << 10)
	if _, err := nc.QueueSubscribe(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet), "q", func(m *nats.Msg) {
		body, _ := json.Marshal(protocol.KVGetReply{Found: true, Value: value})
		if err := e.overflow.Reply(context.Background(), m, body, nil); err != nil {
			t.Errorf("reply: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := withTimeout(t, 20*time.Second)

	_, err := tr.Request(ctx, subject, nil, nil)
	if pe := wantCode(t, err, protocol.PayloadTooLarge); pe.Retryable {
		t.Fatalf("%v is retryable, but the operation has run", err)
	}
	if ops := rc.ops(); !equalOps(ops, "get") {
		t.Fatalf("sent %v, want the one call", ops)
	}

	r, err := tr.Request(ctx, subject, nil, nats.Header{protocol.HeaderOverflow: []string{"1"}})
	if err != nil || !bytes.Equal(r.Data, big) {
		t.Fatalf("parked reply = %d bytes, %v; want %d", len(r.Data), err, len(big))
	}
	if r.Header.Get("X-Kept") != "yes" || r.Header.Get(protocol.HeaderOverflowReply) != "" || r.Instance != e.overflow.Owner() {
		t.Fatalf("parked reply headers %v from %q", r.Header, r.Instance)
	}
	if ops := rc.ops(); !equalOps(ops, "get", "overflow.read×", "overflow.close") {
		t.Fatalf("sent %v", ops)
	}
	e.wantNoSessions(t)

	// The typed clients say so on every call.
	v, found, err := NewKeyValue(tr).Get(ctx, "k")
	if err != nil || !found || !bytes.Equal(v, value) {
		t.Fatalf("KeyValue.Get of a parked value = %d bytes, %v, %v", len(v), found, err)
	}
	if ms := rc.messages(); len(ms) == 0 || ms[0].Header.Get(protocol.HeaderOverflow) != "1" {
		t.Fatalf("KeyValue.Get did not carry %s: 1", protocol.HeaderOverflow)
	}
	e.wantNoSessions(t)
}

// Done-when 4: a transfer open waits for the next engine; the transfer's own calls,
// and the reads of a parked reply, fail at once when their engine is gone.
func TestTransferOpenWaitsButItsOwnCallsDoNot(t *testing.T) {
	srv := smallBroker(t)
	e := newObjectEngine(t, srv, sessions.TransferConfig{}, sessions.OverflowConfig{})
	tr, rc := recordingTransport(t, srv)
	objs := NewObjectStorage(tr)
	big := pattern(100 << 10)
	e.put("p", "big", big)

	// The next engine's host comes up 300 ms after the transfer began.
	served, done := make(chan error, 1), make(chan struct{})
	timer := time.AfterFunc(300*time.Millisecond, func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		served <- e.transfers.Serve(ctx)
	})
	t.Cleanup(func() {
		if !timer.Stop() {
			<-done
		}
	})
	start := time.Now()
	got, err := objs.DownloadObject(withTimeout(t, 20*time.Second), "p", "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("DownloadObject = %d bytes, %v", len(got), err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Fatalf("the transfer ended after %s, before its host served at 300ms", elapsed)
	}
	if st := tr.Counters().Snapshot(); st.Retries == 0 {
		t.Fatalf("stats = %+v, want the open retried", st)
	}
	rc.ops()

	// The owner of a session vanishes between its start and its first read.
	retries := tr.Counters().Snapshot().Retries
	rc.setBefore(func(m *nats.Msg, _ int) {
		if strings.HasSuffix(m.Subject, ".read") {
			e.transfers.Stop()
		}
	})
	_, err = objs.DownloadObject(withTimeout(t, 20*time.Second), "p", "big")
	if pe := wantCode(t, err, protocol.Unavailable); !errors.Is(err, nats.ErrNoResponders) || pe.Retryable {
		t.Fatalf("read from a vanished owner: %v, want no responders, not retryable (the get ran)", err)
	}
	if ops := rc.ops(); !equalOps(ops, "transfer.open", "transfer.start", "transfer.read", "transfer.close") {
		t.Fatalf("sent %v, want one read, then the close", ops)
	}

	// Likewise the engine that parked a reply.
	rc.setBefore(func(m *nats.Msg, _ int) {
		if strings.HasPrefix(m.Subject, protocol.OverflowPrefix+".") {
			e.overflow.Stop()
		}
	})
	_, err = objs.GetObject(withTimeout(t, 20*time.Second), "p", "big")
	if pe := wantCode(t, err, protocol.Unavailable); !errors.Is(err, nats.ErrNoResponders) || pe.Retryable {
		t.Fatalf("parked reply of a vanished owner: %v, want no responders, not retryable", err)
	}
	if ops := rc.ops(); !equalOps(ops, protocol.OpGetObject, "overflow.read", "overflow.close") {
		t.Fatalf("sent %v, want one read, then the close", ops)
	}
	if st := tr.Counters().Snapshot(); st.Retries != retries {
		t.Fatalf("stats = %+v, want no retry beyond the %d of the first open", st, retries)
	}
}

// A write the host refuses ends the transfer, and the client closes the session (the
// host keeps a session whose write failed).
func TestSessionIsClosedWhenAWriteFails(t *testing.T) {
	srv := smallBroker(t)
	e := startObjectEngine(t, srv, sessions.TransferConfig{MaxBufferedBytes: 24 << 10}, sessions.OverflowConfig{})
	tr, rc := recordingTransport(t, srv)
	// Three chunks spend the host's byte budget; the fourth is refused.
	err := NewObjectStorage(tr).PutObject(withTimeout(t, 20*time.Second), "p", "budget", pattern(64<<10))
	wantCode(t, err, protocol.ResourceExhausted)
	e.wantNoSessions(t)
	if ops := rc.ops(); !equalOps(ops, "transfer.open", "transfer.write×", "transfer.close") {
		t.Fatalf("sent %v", ops)
	}
}

// Whatever else fails, the client closes its session.
func TestSessionsAreClosedOnErrors(t *testing.T) {
	srv := smallBroker(t)
	e := startObjectEngine(t, srv, sessions.TransferConfig{}, sessions.OverflowConfig{})
	tr, rc := recordingTransport(t, srv, WithMaxTransferBytes(100<<10))
	objs := NewObjectStorage(tr)
	ctx := withTimeout(t, 20*time.Second)

	// The operation fails at its start.
	_, err := objs.DownloadObject(ctx, "p", "missing")
	if wantCode(t, err, protocol.NotFound); !strings.Contains(err.Error(), "p/missing") {
		t.Fatalf("the engine's message is lost: %v", err)
	}
	e.wantNoSessions(t)
	if ops := rc.ops(); !equalOps(ops, "transfer.open", "transfer.start", "transfer.close") {
		t.Fatalf("sent %v", ops)
	}

	// The caller gives up halfway through the reads: the close still goes out.
	e.put("p", "big", pattern(90<<10))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc.setBefore(func(m *nats.Msg, n int) {
		if strings.HasSuffix(m.Subject, ".read") && n == 2 {
			cancel()
		}
	})
	if _, err := objs.DownloadObject(cctx, "p", "big"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled download: %v", err)
	}
	rc.setBefore(nil)
	e.wantNoSessions(t)
	if ops := rc.ops(); !equalOps(ops, "transfer.open", "transfer.start", "transfer.read×", "transfer.close") {
		t.Fatalf("sent %v", ops)
	}

	// Above the client's own limit: refused as soon as the size is known, never
	// retried by another way.
	e.put("p", "huge", pattern(200<<10))
	_, err = objs.DownloadObject(ctx, "p", "huge")
	if wantCode(t, err, protocol.PayloadTooLarge); !errors.Is(err, errOverLimit) {
		t.Fatalf("download above the limit: %v", err)
	}
	_, err = objs.GetObject(ctx, "p", "huge")
	if wantCode(t, err, protocol.PayloadTooLarge); !errors.Is(err, errOverLimit) {
		t.Fatalf("parked reply above the limit: %v", err)
	}
	err = objs.PutObject(ctx, "p", "huge2", pattern(200<<10))
	if wantCode(t, err, protocol.PayloadTooLarge); !errors.Is(err, errOverLimit) {
		t.Fatalf("upload above the limit: %v", err)
	}
	e.wantNoSessions(t)
	if ops := rc.ops(); !equalOps(ops, "transfer.open", "transfer.start", "transfer.close", protocol.OpGetObject, "overflow.close") {
		t.Fatalf("sent %v: want the download closed after its start, the parked reply closed unread, the upload never sent", ops)
	}
}

// The client asks for the largest chunk that fits a message and uses what the host
// grants, even if smaller.
func TestChunkSizeNegotiation(t *testing.T) {
	for _, tc := range []struct {
		maxPayload int64
		want       int
		code       protocol.Code
	}{
		{0, 0, protocol.Unavailable},
		{2000, 0, protocol.PayloadTooLarge},
		{2048, 1024, ""},
		{smallMaxPayload, smallMaxPayload / 2, ""},
		{1 << 20, 512 << 10, ""},
		{64 << 20, 1 << 20, ""},
	} {
		got, perr := chunkFor(tc.maxPayload)
		if got != tc.want || (perr == nil) != (tc.code == "") || (perr != nil && perr.Code != tc.code) {
			t.Errorf("chunkFor(%d) = %d, %v; want %d, %q", tc.maxPayload, got, perr, tc.want, tc.code)
		}
		// Whatever it asks for fits one message as base64 with room to spare.
		if got > 0 && int64(4*(got+2)/3+transferEnvelopeBytes) > tc.maxPayload {
			t.Errorf("chunkFor(%d) = %d does not fit one message", tc.maxPayload, got)
		}
	}

	srv := smallBroker(t)
	e := startObjectEngine(t, srv, sessions.TransferConfig{ChunkBytes: 2048}, sessions.OverflowConfig{})
	tr, rc := recordingTransport(t, srv)
	data := pattern(10*2048 - 5)
	if err := NewObjectStorage(tr).PutObject(withTimeout(t, 20*time.Second), "p", "k", data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.object("p", "k"), data) {
		t.Fatal("the stored object differs")
	}
	var writes []uint64
	for _, m := range rc.messages() {
		switch {
		case strings.HasSuffix(m.Subject, ".open"):
			var o protocol.TransferOpenRequest
			if err := json.Unmarshal(m.Data, &o); err != nil || o.ChunkBytes != smallMaxPayload/2 || o.Size != int64(len(data)) || o.Operation != "put" {
				t.Fatalf("open %s: %v", m.Data, err)
			}
			if string(o.Metadata) != `{"prefix":"p","key":"k"}` {
				t.Fatalf("metadata %s", o.Metadata)
			}
		case strings.HasSuffix(m.Subject, ".write"):
			var w protocol.TransferWriteRequest
			if err := json.Unmarshal(m.Data, &w); err != nil || len(w.Data) > 2048 || w.Context == nil || w.Context.TimeoutMS <= 0 {
				t.Fatalf("write of %d bytes: %v", len(w.Data), err)
			}
			writes = append(writes, w.Sequence)
		}
	}
	if len(writes) != 10 || writes[0] != 0 || writes[9] != 9 {
		t.Fatalf("write sequences %v, want 0..9 in chunks of the 2048 granted", writes)
	}
}

// Without a transfer host, a large object waits for one like any call, then fails as
// "no responders"; it is never sent as one message.
func TestLargeObjectWithoutATransferHost(t *testing.T) {
	cn, en := broker(t, natstest.WithMaxPayload(smallMaxPayload))
	e := startMemEngine(t, en)
	tr := transport(t, cn, WithRetryPolicy(RetryPolicy{
		Window: 300 * time.Millisecond, FirstDelay: 50 * time.Millisecond, MaxDelay: 100 * time.Millisecond, Margin: 500 * time.Millisecond,
	}))
	// 12 KiB fits as bytes but not as base64 in JSON.
	err := NewObjectStorage(tr).PutObject(withTimeout(t, 10*time.Second), "p", "big", make([]byte, 12<<10))
	var ce *CallError
	if !errors.Is(err, nats.ErrNoResponders) || !errors.As(err, &ce) || ce.Subject != objectPrefix+".open" {
		t.Fatalf("PutObject: %v, want no responders on the transfer open", err)
	}
	if n := e.calls.Load(); n != 0 {
		t.Fatalf("the engine got %d unary calls, want none", n)
	}
	if st := tr.Counters().Snapshot(); st.Calls != 1 || st.Retries == 0 || st.GiveUps != 1 || st.Failures[protocol.Unavailable] != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestTransferRefusesBadRequestsBeforeSending(t *testing.T) {
	srv := smallBroker(t)
	tr, rc := recordingTransport(t, srv)
	ctx := withTimeout(t, 10*time.Second)
	for name, call := range map[string]func() error{
		"wildcard prefix": func() error { _, err := tr.Download(ctx, "abi.>", "get", nil); return err },
		"metadata not JSON": func() error {
			_, err := tr.Download(ctx, objectPrefix, "get", func() {})
			return err
		},
		"metadata too large": func() error {
			_, err := tr.Upload(ctx, objectPrefix, "put", map[string]string{"key": strings.Repeat("k", protocol.MaxTransferMetadataBytes)}, []byte("x"))
			return err
		},
	} {
		if err := call(); !errors.Is(err, protocol.ErrInvalidArgument) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if ops := rc.ops(); len(ops) != 0 {
		t.Fatalf("sent %v, want nothing", ops)
	}
	if st := tr.Counters().Snapshot(); st.Calls != 3 || st.Failures[protocol.InvalidArgument] != 3 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestParkedRefDecoding(t *testing.T) {
	const id = owner + ":fedcba9876543210fedcba9876543210"
	hdr := func(kv ...string) nats.Header {
		h := nats.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	envelope := func(ref protocol.OverflowRef) []byte {
		b, _ := json.Marshal(protocol.OverflowEnvelope{Overflow: &ref})
		return b
	}
	for _, tc := range []struct {
		name   string
		msg    *nats.Msg
		parked bool
		want   protocol.OverflowRef
		bad    string // in the error, when the announcement is malformed
	}{
		{"ordinary reply", &nats.Msg{Data: []byte(`{"content":"AAE="}`)}, false, protocol.OverflowRef{}, ""},
		{"an overflow member among others", &nats.Msg{Data: []byte(`{"overflow":{"id":"` + id + `"},"keys":[]}`)}, false, protocol.OverflowRef{}, ""},
		{"headers and an empty body", &nats.Msg{Header: hdr(protocol.HeaderOverflowReply, id, protocol.HeaderOverflowSize, "70000")}, true,
			protocol.OverflowRef{ID: id, Size: 70000, Prefix: protocol.OverflowPrefix}, ""},
		{"headers and the envelope", &nats.Msg{
			Header: hdr(protocol.HeaderOverflowReply, id, protocol.HeaderOverflowSize, "70000"),
			Data:   envelope(protocol.OverflowRef{ID: id, Size: 70000, Prefix: "abi.rpc.other", ChunkBytes: 4096}),
		}, true, protocol.OverflowRef{ID: id, Size: 70000, Prefix: "abi.rpc.other", ChunkBytes: 4096}, ""},
		{"the envelope alone", &nats.Msg{Data: envelope(protocol.OverflowRef{ID: id, Size: 5, Prefix: protocol.OverflowPrefix})}, true,
			protocol.OverflowRef{ID: id, Size: 5, Prefix: protocol.OverflowPrefix}, ""},
		{"a size that is not a number", &nats.Msg{Header: hdr(protocol.HeaderOverflowReply, id, protocol.HeaderOverflowSize, "lots")}, true,
			protocol.OverflowRef{}, "lots"},
		{"sizes that disagree", &nats.Msg{
			Header: hdr(protocol.HeaderOverflowReply, id, protocol.HeaderOverflowSize, "70000"),
			Data:   envelope(protocol.OverflowRef{ID: id, Size: 7, Prefix: protocol.OverflowPrefix}),
		}, true, protocol.OverflowRef{}, "70000"},
		{"a wildcard prefix", &nats.Msg{Data: envelope(protocol.OverflowRef{ID: id, Size: 5, Prefix: "abi.>"})}, true, protocol.OverflowRef{}, "abi.>"},
		{"a session id without owner", &nats.Msg{Header: hdr(protocol.HeaderOverflowReply, "abc", protocol.HeaderOverflowSize, "5")}, true, protocol.OverflowRef{}, "abc"},
	} {
		ref, parked, perr := parkedRef(tc.msg)
		switch {
		case parked != tc.parked:
			t.Errorf("%s: parked = %v, want %v", tc.name, parked, tc.parked)
		case tc.bad != "":
			if perr == nil || perr.Code != protocol.Internal || !strings.Contains(perr.Message, tc.bad) {
				t.Errorf("%s: error %v, want INTERNAL naming %q", tc.name, perr, tc.bad)
			}
		case perr != nil:
			t.Errorf("%s: %v", tc.name, perr)
		case tc.parked && *ref != tc.want:
			t.Errorf("%s: ref %+v, want %+v", tc.name, *ref, tc.want)
		}
	}
}
