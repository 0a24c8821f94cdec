package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testPrefix  = "abi.svc.test.v1.transfer"
	callTimeout = 10 * time.Second
)

func newEngine(t testing.TB) *actor.Engine {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// engineOf is the actor engine the host actor was spawned on.
func engineOf(h *TransferHost) *actor.Engine { return h.ref.Load().eng }

// countRestarts counts the in-place restarts of the actors on eng after a recovered
// panic (actors.Restarted on its event stream), from now on.
func countRestarts(t testing.TB, eng *actor.Engine) func() int {
	t.Helper()
	var n atomic.Int64
	pid := eng.SpawnFunc(func(c *actor.Context) {
		if _, ok := c.Message().(actors.Restarted); ok {
			n.Add(1)
		}
	}, "restarts")
	eng.Subscribe(pid)
	t.Cleanup(func() {
		eng.Unsubscribe(pid)
		<-eng.Poison(pid).Done()
	})
	return func() int { return int(n.Load()) }
}

// startHost builds, spawns and serves a host, closed at cleanup.
func startHost(t testing.TB, nc *nats.Conn, cfg TransferConfig) *TransferHost {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = testPrefix
	}
	if cfg.LeaseValid == nil {
		cfg.LeaseValid = leaseHeld
	}
	h, err := NewTransferHost(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	spawnAndServe(t, h)
	return h
}

func spawnAndServe(t testing.TB, h *TransferHost) {
	t.Helper()
	h.Spawn(newEngine(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
}

// leaseHeld is the lease check of a host whose engine always holds its lease.
func leaseHeld() bool { return true }

// store is the service behind the test handlers: objects by key.
type store struct {
	mu      sync.Mutex
	objects map[string][]byte
}

type objectMeta struct {
	Key string `json:"key"`
}

func (s *store) handlers() map[string]Handler {
	key := func(req TransferRequest) (string, error) {
		var m objectMeta
		if err := json.Unmarshal(req.Metadata, &m); err != nil || m.Key == "" {
			return "", protocol.Errorf(protocol.InvalidArgument, "metadata %s names no key", req.Metadata)
		}
		return m.Key, nil
	}
	return map[string]Handler{
		"put": func(_ context.Context, req TransferRequest) ([]byte, error) {
			k, err := key(req)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.objects[k] = req.Upload
			return nil, nil
		},
		"get": func(_ context.Context, req TransferRequest) ([]byte, error) {
			k, err := key(req)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			v, ok := s.objects[k]
			if !ok {
				return nil, protocol.Errorf(protocol.NotFound, "no object %q", k)
			}
			return v, nil
		},
		"echo": func(_ context.Context, req TransferRequest) ([]byte, error) { return req.Upload, nil },
	}
}

func newStore() *store { return &store{objects: map[string][]byte{}} }

// client is the in-test transfer client: plain NATS requests on the wire protocol.
// Every reply must carry the instance header of the engine the call went to.
type client struct {
	t      testing.TB
	nc     *nats.Conn
	prefix string
}

func newClient(t testing.TB, nc *nats.Conn, prefix string) *client {
	return &client{t: t, nc: nc, prefix: prefix}
}

// call sends req to subject and decodes the reply into out, or returns the
// *protocol.Error it carries. wantOwner, when set, is the owner the reply must name.
func (c *client) call(subject, wantOwner string, hdr nats.Header, req, out any) (*nats.Msg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	msg, err := c.nc.RequestMsg(&nats.Msg{Subject: subject, Data: body, Header: hdr}, callTimeout)
	if err != nil {
		return nil, err
	}
	owner := msg.Header.Get(protocol.HeaderInstance)
	if !ValidOwnerID(owner) || (wantOwner != "" && owner != wantOwner) {
		c.t.Errorf("reply on %s names instance %q, want %q", subject, owner, wantOwner)
	}
	if code := msg.Header.Get(protocol.HeaderErrorCode); code != "" {
		var env protocol.Envelope
		if err := json.Unmarshal(msg.Data, &env); err != nil || env.Error == nil {
			c.t.Fatalf("error reply %q with body %q", code, msg.Data)
		}
		if string(env.Error.Code) != code {
			c.t.Errorf("error header %s, body code %s", code, env.Error.Code)
		}
		return msg, env.Error
	}
	if out != nil {
		if err := json.Unmarshal(msg.Data, out); err != nil {
			c.t.Fatalf("reply on %s: %v: %q", subject, err, msg.Data)
		}
	}
	return msg, nil
}

func (c *client) sessionCall(op, id string, req, out any) error {
	subject, err := protocol.TransferSessionSubject(c.prefix, id, op)
	if err != nil {
		return err
	}
	owner, _, _ := ParseSessionID(id)
	_, err = c.call(subject, owner, nil, req, out)
	return err
}

func (c *client) open(op string, meta any, chunk int) (protocol.TransferOpenReply, error) {
	var raw json.RawMessage
	if meta != nil {
		raw, _ = json.Marshal(meta)
	}
	var r protocol.TransferOpenReply
	msg, err := c.call(OpenSubject(c.prefix), "", nil, protocol.TransferOpenRequest{Operation: op, Metadata: raw, ChunkBytes: chunk}, &r)
	if err == nil {
		if owner, _, perr := ParseSessionID(r.ID); perr != nil || owner != msg.Header.Get(protocol.HeaderInstance) {
			c.t.Errorf("open answered id %q by instance %q", r.ID, msg.Header.Get(protocol.HeaderInstance))
		}
	}
	return r, err
}

func (c *client) write(id string, seq uint64, data []byte) error {
	return c.sessionCall(protocol.TransferWrite, id, protocol.TransferWriteRequest{ID: id, Sequence: seq, Data: data}, &protocol.TransferWriteReply{})
}

func (c *client) start(id string) (int64, error) {
	var r protocol.TransferStartReply
	err := c.sessionCall(protocol.TransferStart, id, protocol.TransferStartRequest{ID: id}, &r)
	return r.Size, err
}

func (c *client) read(id string, seq uint64) (protocol.TransferReadReply, error) {
	var r protocol.TransferReadReply
	err := c.sessionCall(protocol.TransferRead, id, protocol.TransferReadRequest{ID: id, Sequence: seq}, &r)
	return r, err
}

func (c *client) close(id string) error {
	return c.sessionCall(protocol.TransferClose, id, protocol.TransferCloseRequest{ID: id}, &protocol.Empty{})
}

// writeAll writes data in chunks of the session's size.
func (c *client) writeAll(id string, chunk int, data []byte) error {
	for seq := 0; len(data) > 0; seq++ {
		n := min(chunk, len(data))
		if err := c.write(id, uint64(seq), data[:n]); err != nil {
			return fmt.Errorf("write %d: %w", seq, err)
		}
		data = data[n:]
	}
	return nil
}

// readAll reads from sequence 0 until done.
func (c *client) readAll(id string) ([]byte, error) {
	var out []byte
	for seq := uint64(0); ; seq++ {
		r, err := c.read(id, seq)
		if err != nil {
			return nil, fmt.Errorf("read %d: %w", seq, err)
		}
		if r.Sequence != seq {
			return nil, fmt.Errorf("read %d answered sequence %d", seq, r.Sequence)
		}
		out = append(out, r.Data...)
		if r.Done {
			return out, nil
		}
	}
}

// roundTripOn runs the rest of an open session: write, start, read, close.
func (c *client) roundTripOn(o protocol.TransferOpenReply, data []byte) ([]byte, error) {
	if err := c.writeAll(o.ID, o.ChunkBytes, data); err != nil {
		return nil, err
	}
	if _, err := c.start(o.ID); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	out, err := c.readAll(o.ID)
	if err != nil {
		return nil, err
	}
	return out, c.close(o.ID)
}

// roundTrip runs one whole session: open, write, start, read, close.
func (c *client) roundTrip(op string, meta any, data []byte) ([]byte, error) {
	o, err := c.open(op, meta, 0)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return c.roundTripOn(o, data)
}

func wantCode(t testing.TB, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("got %v, want a %s error", err, code)
	}
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// newFakeClock is a clock moved by hand, at a fixed date.
func newFakeClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// connect starts nothing: a client connection to srv, closed at cleanup.
func connect(t testing.TB, srv *natstest.Server) *nats.Conn { return natstest.Connect(t, srv.URL()) }

// watchReaps hooks h's reap passes and returns a wait for the first pass that judged
// the time at or after at. A pass already under way when the clock moved judged the
// old time; waiting for any pass would take it for the one that follows the move.
// handled returns once the host actor has handled every message sent to it before,
// such as the end of a call its client has the answer of (the host stamps the
// session's idle time then, on its clock): a Serve to a host that serves already is
// answered at once, behind them in its mailbox. Call it before moving a fake clock.
func handled(t *testing.T, h *TransferHost) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
}

func watchReaps(h *TransferHost) func(t *testing.T, at time.Time) {
	passes := make(chan time.Time, 256)
	h.afterReap = func(now time.Time) {
		select {
		case passes <- now:
		default: // never block the host actor; the test reads the passes it waits for
		}
	}
	return func(t *testing.T, at time.Time) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case now := <-passes:
				if !now.Before(at) {
					return
				}
			case <-timeout:
				t.Fatalf("no reap pass at %s after the clock moved", at)
			}
		}
	}
}
