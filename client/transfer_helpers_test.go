package client

import (
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

// RequestWithContext records a request without headers as RequestMsgWithContext does.
func (c *recordingConn) RequestWithContext(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	return c.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: data})
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
