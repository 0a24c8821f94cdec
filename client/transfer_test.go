package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

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

	// KeyValue.Get asks for a parked reply only once the engine says the value does
	// not fit: the first get goes without the header, the second with it.
	v, found, err := NewKeyValue(tr).Get(ctx, "k")
	if err != nil || !found || !bytes.Equal(v, value) {
		t.Fatalf("KeyValue.Get of a parked value = %d bytes, %v, %v", len(v), found, err)
	}
	ms := rc.messages()
	if ops := rc.ops(); !equalOps(ops, "get", "get", "overflow.read×", "overflow.close") {
		t.Fatalf("KeyValue.Get sent %v, want a get, the get again, then the parked reply's reads", ops)
	}
	if ms[0].Header.Get(protocol.HeaderOverflow) != "" || ms[1].Header.Get(protocol.HeaderOverflow) != "1" {
		t.Fatalf("KeyValue.Get's %s: first %q, then %q; want none, then 1", protocol.HeaderOverflow,
			ms[0].Header.Get(protocol.HeaderOverflow), ms[1].Header.Get(protocol.HeaderOverflow))
	}
	if st := tr.Counters().Snapshot(); st.OverflowResends != 1 || st.Failures[protocol.PayloadTooLarge] != 1 || st.Retries != 0 {
		t.Fatalf("stats = %+v, want one overflow resend, and only the first plain Request failed", st)
	}
	e.wantNoSessions(t)
}

// A get the engine answers PAYLOAD_TOO_LARGE even with the overflow header (it cannot
// park the value) is resent once, not again, and fails with the engine's error. A
// trace context the caller sends is kept on the resend.
func TestGetIsResentWithTheOverflowHeaderOnce(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	if _, err := nc.QueueSubscribe(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet), "q", func(m *nats.Msg) {
		replyError(t, m, protocol.Errorf(protocol.PayloadTooLarge, "the reply of 3000000 bytes is above the overflow limit"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, rc := recordingTransport(t, srv)
	ctx := trace.ContextWithSpanContext(withTimeout(t, 10*time.Second), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	}))

	_, _, err := NewKeyValue(tr).Get(ctx, "k")
	if pe := wantCode(t, err, protocol.PayloadTooLarge); pe.Retryable {
		t.Fatalf("%v is retryable", err)
	}
	ms := rc.messages()
	if len(ms) != 2 {
		t.Fatalf("KeyValue.Get sent %d requests, want the get and one resend", len(ms))
	}
	for i, want := range []string{"", "1"} {
		if got := ms[i].Header.Get(protocol.HeaderOverflow); got != want {
			t.Errorf("request %d: %s = %q, want %q", i, protocol.HeaderOverflow, got, want)
		}
		if ms[i].Header.Get("traceparent") == "" {
			t.Errorf("request %d lost the caller's trace context: %v", i, ms[i].Header)
		}
	}
	if st := tr.Counters().Snapshot(); st.Calls != 1 || st.OverflowResends != 1 || st.Failures[protocol.PayloadTooLarge] != 1 {
		t.Fatalf("stats = %+v, want one call, one resend, one failure", st)
	}
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
