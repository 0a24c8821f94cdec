package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// A broker of 16 KiB: chunks of at most 8 KiB, so a few dozen KiB make many chunks.
const testMaxPayload = 16 << 10

func smallBroker(t *testing.T) *natstest.Server {
	return natstest.Start(t, natstest.WithMaxPayload(testMaxPayload))
}

func TestUploadThenDownloadEndToEnd(t *testing.T) {
	srv := smallBroker(t)
	s := newStore()
	h := startHost(t, connect(t, srv), TransferConfig{Handlers: s.handlers()})
	c := newClient(t, connect(t, srv), testPrefix)
	data := payload(5*8192 + 123)

	// Upload: write chunks, then start hands the assembled bytes to the service.
	o, err := c.open("put", objectMeta{Key: "k"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.ChunkBytes != testMaxPayload/2 {
		t.Fatalf("chunk %d, want half the max payload %d", o.ChunkBytes, testMaxPayload/2)
	}
	if err := c.writeAll(o.ID, o.ChunkBytes, data); err != nil {
		t.Fatal(err)
	}
	if size, err := c.start(o.ID); err != nil || size != 0 {
		t.Fatalf("start = %d, %v", size, err)
	}
	if r, err := c.read(o.ID, 0); err != nil || !r.Done || len(r.Data) != 0 {
		t.Fatalf("an upload reads as one empty last chunk, got %+v, %v", r, err)
	}
	if err := c.close(o.ID); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.objects["k"], data) {
		t.Fatalf("stored %d bytes, want the %d uploaded", len(s.objects["k"]), len(data))
	}

	// Download: open names the object, start produces it, reads fetch it by sequence.
	o, err = c.open("get", objectMeta{Key: "k"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if size, err := c.start(o.ID); err != nil || size != int64(len(data)) {
		t.Fatalf("start = %d, %v; want %d", size, err, len(data))
	}
	got, err := c.readAll(o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes, want %d", len(got), len(data))
	}
	if err := c.close(o.ID); err != nil {
		t.Fatal(err)
	}

	// A handler's error reaches the client, and ends the session.
	o, _ = c.open("get", objectMeta{Key: "missing"}, 0)
	_, err = c.start(o.ID)
	wantCode(t, err, protocol.NotFound)
	if !strings.Contains(err.Error(), "missing") {
		t.Fatalf("the handler's message is lost: %v", err)
	}
	if h.Sessions() != 0 {
		t.Fatalf("%d sessions open after every one ended", h.Sessions())
	}
}

func TestChunkSizeNegotiation(t *testing.T) {
	srv := smallBroker(t)
	nc := connect(t, srv)
	startHost(t, nc, TransferConfig{Handlers: newStore().handlers()})
	c := newClient(t, connect(t, srv), testPrefix)
	for _, tc := range []struct{ ask, want int }{
		{0, 8192}, {1024, 1024}, {4000, 4000}, {8192, 8192}, {1 << 20, 8192},
	} {
		o, err := c.open("echo", nil, tc.ask)
		if err != nil || o.ChunkBytes != tc.want {
			t.Errorf("asked %d: got %d, %v; want %d", tc.ask, o.ChunkBytes, err, tc.want)
		}
	}
	for _, ask := range []int{1, 1023, -5} {
		_, err := c.open("echo", nil, ask)
		wantCode(t, err, protocol.InvalidArgument)
	}

	// The largest chunk really fits the broker both ways.
	o, _ := c.open("echo", nil, 1<<20)
	data := payload(3*o.ChunkBytes + 1)
	if err := c.writeAll(o.ID, o.ChunkBytes, data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.start(o.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := c.readAll(o.ID); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("echo of %d bytes in chunks of %d: %d bytes, %v", len(data), o.ChunkBytes, len(got), err)
	}

	// A host configured smaller offers its own size.
	small := startHost(t, nc, TransferConfig{Prefix: "abi.svc.small.v1.transfer", ChunkBytes: 2048, Handlers: newStore().handlers()})
	sc := newClient(t, connect(t, srv), small.Prefix())
	for _, ask := range []int{0, 4096} {
		if o, err := sc.open("echo", nil, ask); err != nil || o.ChunkBytes != 2048 {
			t.Errorf("asked %d of a 2048 host: %d, %v", ask, o.ChunkBytes, err)
		}
	}
}

func TestHostsRefuseBrokersAndChunksTooSmall(t *testing.T) {
	tiny := natstest.Start(t, natstest.WithMaxPayload(2000))
	if _, err := NewTransferHost(connect(t, tiny), TransferConfig{Prefix: testPrefix, LeaseValid: leaseHeld}); err == nil || !strings.Contains(err.Error(), "2000") {
		t.Fatalf("a 2000-byte broker: %v, want an error naming it", err)
	}
	srv := natstest.Start(t)
	if _, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix, ChunkBytes: 512, LeaseValid: leaseHeld}); err == nil || !strings.Contains(err.Error(), "512") {
		t.Fatalf("chunk 512: %v, want an error naming it", err)
	}
	if _, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: "abi.>", LeaseValid: leaseHeld}); err == nil {
		t.Fatal("a wildcard prefix is accepted")
	}
	if _, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix, Handlers: map[string]Handler{"a.b": nil}, LeaseValid: leaseHeld}); err == nil {
		t.Fatal("an operation of two tokens is accepted")
	}
	if _, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix}); err == nil || !strings.Contains(err.Error(), "LeaseValid") {
		t.Fatalf("no lease check: %v, want an error naming LeaseValid", err)
	}
}

func TestSessionsAreStrictlySequenced(t *testing.T) {
	srv := smallBroker(t)
	startHost(t, connect(t, srv), TransferConfig{Handlers: newStore().handlers()})
	c := newClient(t, connect(t, srv), testPrefix)
	o, _ := c.open("echo", nil, 1024)

	wantCode(t, c.write(o.ID, 1, []byte("b")), protocol.Conflict)
	if err := c.write(o.ID, 0, []byte("a")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.write(o.ID, 0, []byte("a")), protocol.Conflict) // a replay
	wantCode(t, c.write(o.ID, 1, payload(1025)), protocol.PayloadTooLarge)
	if err := c.write(o.ID, 1, payload(1024)); err != nil {
		t.Fatal(err)
	}
	_, err := c.read(o.ID, 0)
	wantCode(t, err, protocol.Conflict) // before start
	if size, err := c.start(o.ID); err != nil || size != 1025 {
		t.Fatalf("start = %d, %v", size, err)
	}
	_, err = c.start(o.ID)
	wantCode(t, err, protocol.Conflict)
	wantCode(t, c.write(o.ID, 2, []byte("c")), protocol.Conflict) // after start
	_, err = c.read(o.ID, 1)
	wantCode(t, err, protocol.Conflict)
	if r, err := c.read(o.ID, 0); err != nil || r.Done || len(r.Data) != 1024 {
		t.Fatalf("read 0 = %d bytes done=%v, %v", len(r.Data), r.Done, err)
	}
	if r, err := c.read(o.ID, 1); err != nil || !r.Done || len(r.Data) != 1 {
		t.Fatalf("read 1 = %d bytes done=%v, %v", len(r.Data), r.Done, err)
	}
	_, err = c.read(o.ID, 2)
	wantCode(t, err, protocol.Conflict) // past the end
}

func TestUnknownAndClosedSessionsAreNotFound(t *testing.T) {
	srv := natstest.Start(t) // room for the largest metadata
	h := startHost(t, connect(t, srv), TransferConfig{Handlers: newStore().handlers()})
	c := newClient(t, connect(t, srv), testPrefix)

	unknown := NewSessionID(h.Owner())
	wantCode(t, c.write(unknown, 0, []byte("x")), protocol.NotFound)
	_, err := c.start(unknown)
	wantCode(t, err, protocol.NotFound)
	_, err = c.read(unknown, 0)
	wantCode(t, err, protocol.NotFound)
	if err := c.close(unknown); err != nil {
		t.Fatalf("closing an unknown session: %v, want success", err)
	}

	o, _ := c.open("echo", nil, 0)
	if err := c.close(o.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.write(o.ID, 0, []byte("x")), protocol.NotFound)
	_, err = c.read(o.ID, 0)
	wantCode(t, err, protocol.NotFound)
	if err := c.close(o.ID); err != nil {
		t.Fatalf("closing twice: %v", err)
	}

	// Malformed requests are INVALID_ARGUMENT, with the full error shape of §4.3.
	msg, err := c.call(OwnerSubject(testPrefix, h.Owner(), "read"), h.Owner(), nil, protocol.TransferReadRequest{ID: "nope"}, nil)
	wantCode(t, err, protocol.InvalidArgument)
	if msg.Header.Get("Nats-Service-Error-Code") != "400" || msg.Header.Get("Nats-Service-Error") == "" {
		t.Fatalf("error headers %v", msg.Header)
	}
	raw, err := c.nc.Request(OwnerSubject(testPrefix, h.Owner(), "write"), []byte("{"), callTimeout)
	if err != nil || raw.Header.Get(protocol.HeaderErrorCode) != string(protocol.InvalidArgument) {
		t.Fatalf("bad JSON: %v %v", raw, err)
	}
	_, err = c.open("frobnicate", nil, 0)
	wantCode(t, err, protocol.InvalidArgument)
	_, err = c.open("put", strings.Repeat("m", protocol.MaxTransferMetadataBytes), 0)
	wantCode(t, err, protocol.InvalidArgument)
}

func TestLimits(t *testing.T) {
	srv := smallBroker(t)
	s := newStore()
	s.objects["big"] = payload(5000)
	h := startHost(t, connect(t, srv), TransferConfig{
		Handlers: s.handlers(), MaxSessions: 3, MaxSessionBytes: 4096, MaxBufferedBytes: 6000,
	})
	c := newClient(t, connect(t, srv), testPrefix)

	// Sessions.
	var ids []string
	for range 3 {
		o, err := c.open("echo", nil, 2048)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	_, err := c.open("echo", nil, 0)
	wantCode(t, err, protocol.ResourceExhausted)

	// Bytes per session.
	if err := c.writeAll(ids[0], 2048, payload(4096)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.write(ids[0], 2, []byte("x")), protocol.PayloadTooLarge)
	// Bytes of the host: 4096 held, 2048 more pass 6000.
	if err := c.write(ids[1], 0, payload(1024)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.write(ids[1], 1, payload(1024)), protocol.ResourceExhausted)

	// Closing gives sessions and bytes back.
	for _, id := range ids {
		if err := c.close(id); err != nil {
			t.Fatal(err)
		}
	}
	o, err := c.open("echo", nil, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.writeAll(o.ID, 2048, payload(4096)); err != nil {
		t.Fatal(err)
	}
	_ = c.close(o.ID)

	// An announced size, and a result, above the session limit.
	_, err = c.call(OpenSubject(testPrefix), h.Owner(), nil, protocol.TransferOpenRequest{Operation: "put", Size: 4097}, nil)
	wantCode(t, err, protocol.PayloadTooLarge)
	o, _ = c.open("get", objectMeta{Key: "big"}, 0)
	_, err = c.start(o.ID)
	wantCode(t, err, protocol.PayloadTooLarge)
	_, err = c.read(o.ID, 0)
	wantCode(t, err, protocol.NotFound)
	if h.Sessions() != 0 {
		t.Fatalf("%d sessions left", h.Sessions())
	}
}

func TestIdleSessionsExpireOnTheClock(t *testing.T) {
	srv := smallBroker(t)
	clock := newFakeClock()
	h, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix, Handlers: newStore().handlers(), Clock: clock, LeaseValid: leaseHeld})
	if err != nil {
		t.Fatal(err)
	}
	reapedAt := watchReaps(h)
	spawnAndServe(t, h)
	c := newClient(t, connect(t, srv), testPrefix)
	pass := func(d time.Duration) {
		t.Helper()
		handled(t, h)
		clock.Advance(d)
		reapedAt(t, clock.Now())
	}

	o, _ := c.open("echo", nil, 0)
	pass(59 * time.Second)
	if err := c.write(o.ID, 0, []byte("a")); err != nil {
		t.Fatalf("a session used 59 s ago expired: %v", err)
	}
	pass(59 * time.Second) // each call restarts the idle time
	if err := c.write(o.ID, 1, []byte("b")); err != nil {
		t.Fatalf("a session used 59 s ago expired: %v", err)
	}
	pass(60 * time.Second)
	wantCode(t, c.write(o.ID, 2, []byte("c")), protocol.NotFound)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.SessionsFinished(ctx); err != nil {
		t.Fatal(err)
	}
}

// The host actor obeys the role commands and answers their sender.
func TestHostActorObeysTheRoleMessages(t *testing.T) {
	srv := smallBroker(t)
	nc := connect(t, srv)
	h, err := NewTransferHost(nc, TransferConfig{Prefix: testPrefix, Handlers: newStore().handlers(), LeaseValid: leaseHeld})
	if err != nil {
		t.Fatal(err)
	}
	eng := newEngine(t)
	pid := h.Spawn(eng)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	replies := make(chan any, 8)
	root := eng.SpawnFunc(func(c *actor.Context) {
		switch m := c.Message().(type) {
		case actors.Accepting, actors.Drained, actors.Down:
			replies <- m
		}
	}, "root")
	next := func() any {
		t.Helper()
		select {
		case m := <-replies:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no reply to a role command")
			return nil
		}
	}
	c := newClient(t, connect(t, srv), testPrefix)

	eng.SendWithSender(pid, actors.Serve{}, root)
	if m := next(); m != (actors.Accepting{From: pid, On: true}) {
		t.Fatalf("Serve answered %#v", m)
	}
	o, err := c.open("echo", nil, 0)
	if err != nil {
		t.Fatal(err)
	}

	eng.SendWithSender(pid, actors.StopAccepting{Deadline: time.Now().Add(time.Minute)}, root)
	if m := next(); m != (actors.Accepting{From: pid, On: false}) {
		t.Fatalf("StopAccepting answered %#v", m)
	}
	if _, err := c.open("echo", nil, 0); err != nats.ErrNoResponders {
		t.Fatalf("open after StopAccepting: %v, want no responders", err)
	}
	if err := c.write(o.ID, 0, []byte("still served")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-replies:
		t.Fatalf("%#v while a session is open", m)
	default:
	}
	if err := c.close(o.ID); err != nil {
		t.Fatal(err)
	}
	if m := next(); m != (actors.Drained{From: pid}) {
		t.Fatalf("after the last session: %#v", m)
	}

	eng.SendWithSender(pid, actors.Stop{}, root)
	if m := next(); m != (actors.Down{From: pid}) {
		t.Fatalf("Stop answered %#v", m)
	}
	if _, err := nc.Request(OwnerSubject(testPrefix, h.Owner(), "read"), []byte("{}"), time.Second); err != nats.ErrNoResponders {
		t.Fatalf("owner subject after Stop: %v, want no responders", err)
	}

	eng.SendWithSender(pid, actors.Serve{}, root) // a fenced engine that renewed serves again
	if m := next(); m != (actors.Accepting{From: pid, On: true}) {
		t.Fatalf("Serve after Stop answered %#v", m)
	}
	if _, err := c.roundTrip("echo", nil, []byte("again")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRequestsDecodeMetadataAsJSON(t *testing.T) {
	// The wire form the client SDK will send: metadata is a JSON object, bytes base64.
	raw := `{"operation":"put","metadata":{"prefix":"p","key":"k"},"chunk_bytes":2048,"context":{"trace_id":"t"}}`
	var req protocol.TransferOpenRequest
	if err := json.Unmarshal([]byte(raw), &req); err != nil || req.Operation != "put" || req.ChunkBytes != 2048 || req.Context.TraceID != "t" {
		t.Fatalf("%+v, %v", req, err)
	}
	b, _ := json.Marshal(protocol.TransferWriteRequest{ID: "i", Sequence: 3, Data: []byte{0xff, 0}})
	if !strings.Contains(string(b), `"data":"/wA="`) {
		t.Fatalf("bytes are not base64: %s", b)
	}
}

func TestCallsInFlightAreBounded(t *testing.T) {
	srv := smallBroker(t)
	running := make(chan struct{}, 2)
	h := startHost(t, connect(t, srv), TransferConfig{MaxCallsInFlight: 2, Handlers: map[string]Handler{
		"stuck": func(ctx context.Context, _ TransferRequest) ([]byte, error) {
			running <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}})
	c := newClient(t, connect(t, srv), testPrefix)
	a, _ := c.open("stuck", nil, 0)
	b, _ := c.open("stuck", nil, 0)
	starts := make(chan error, 2)
	for _, id := range []string{a.ID, b.ID} {
		go func() {
			for {
				_, err := c.start(id)
				// The open answered just before may still be counted in flight for a
				// moment after its reply: a start refused then ran nothing, and is sent
				// again as a client would.
				var pe *protocol.Error
				if errors.As(err, &pe) && pe.Code == protocol.ResourceExhausted {
					continue
				}
				starts <- err
				return
			}
		}()
	}
	for range 2 {
		select {
		case <-running:
		case err := <-starts:
			// A start that times out on a loaded machine never runs its handler:
			// fail saying so instead of waiting for ever.
			t.Fatalf("a start ended before its handler ran: %v", err)
		}
	}
	_, err := c.read(a.ID, 0)
	wantCode(t, err, protocol.ResourceExhausted)
	_, err = c.open("stuck", nil, 0)
	wantCode(t, err, protocol.ResourceExhausted)
	h.Stop()
	wantCode(t, <-starts, protocol.NotFound)
	wantCode(t, <-starts, protocol.NotFound)
}
