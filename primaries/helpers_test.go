package primaries

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/abi-engine/engine/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on the broker; it is generous because it only decides
// when a test gives up, never how fast something must be.
const waitTimeout = 10 * time.Second

// recv waits for one value from ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func alwaysValid() bool { return true }

// workReq and workRep are the bodies of the test service's operations.
type workReq struct {
	protocol.Ctx
	ID string `json:"id"`
}

type workRep struct {
	ID string `json:"id"`
	By string `json:"by"`
}

// gatedService is a test service whose "work" calls report that they started and then
// wait for the gate (or their context) before answering; "echo" answers at once.
type gatedService struct {
	by      string
	gate    chan struct{} // closed to let every waiting call finish
	started chan string   // ids of calls as they start running

	mu        sync.Mutex
	cancelled map[string]error // id -> context cause of calls that saw their context end
}

func newGated(by string) *gatedService {
	return &gatedService{by: by, gate: make(chan struct{}), started: make(chan string, 1000), cancelled: map[string]error{}}
}

func (g *gatedService) open() { close(g.gate) }

func (g *gatedService) cancelledCause(id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancelled[id]
}

func (g *gatedService) service() Service {
	return Service{
		Name: "test_svc",
		Operations: map[string]Operation{
			"work": Handle(func(ctx context.Context, r *workReq) (workRep, error) {
				g.started <- r.ID
				select {
				case <-g.gate:
					return workRep{ID: r.ID, By: g.by}, nil
				case <-ctx.Done():
					g.mu.Lock()
					g.cancelled[r.ID] = context.Cause(ctx)
					g.mu.Unlock()
					return workRep{}, ctx.Err()
				}
			}),
			"echo": Handle(func(_ context.Context, r *workReq) (workRep, error) {
				return workRep{ID: r.ID, By: g.by}, nil
			}),
		},
	}
}

func newPrimary(t *testing.T, nc *nats.Conn, svc Service, id string, maxConc int, lease func() bool) *Primary {
	t.Helper()
	p, err := New(svc, Config{Conn: nc, InstanceID: id, MaxConcurrent: maxConc, LeaseValid: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close %s: %v", id, err)
		}
	})
	return p
}

// spawn starts p's actor on an engine of its own. The test's cleanup closes p while the
// actor runs, then poisons the actor (newPrimary's cleanup closes p again, without it).
func spawn(t *testing.T, p *Primary) *actor.PID {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Spawn(e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close %s with its actor: %v", p.Name(), err)
		}
		<-e.PoisonCtx(ctx, pid).Done()
	})
	return pid
}

// serve spawns p's actor and serves through the method.
func serve(t *testing.T, p *Primary) {
	t.Helper()
	spawn(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.Serve(ctx); err != nil {
		t.Fatal(err)
	}
}

// result is one call's outcome as a caller sees it.
type result struct {
	id   string
	msg  *nats.Msg
	err  error
	rep  workRep
	werr *protocol.Error
}

func (r result) instance() string {
	if r.msg == nil {
		return ""
	}
	return r.msg.Header.Get(protocol.HeaderInstance)
}

// call sends one request to the test service and decodes the reply.
func call(nc *nats.Conn, op, id string, timeout time.Duration) result {
	body, _ := json.Marshal(workReq{ID: id})
	m, err := nc.Request(protocol.ServiceSubject("test_svc", op), body, timeout)
	res := result{id: id, msg: m, err: err}
	if err != nil {
		return res
	}
	if code := m.Header.Get(protocol.HeaderErrorCode); code != "" {
		var env protocol.Envelope
		if err := json.Unmarshal(m.Data, &env); err != nil || env.Error == nil {
			res.err = errors.New("error reply without an envelope: " + string(m.Data))
			return res
		}
		res.werr = env.Error
		return res
	}
	if err := json.Unmarshal(m.Data, &res.rep); err != nil {
		res.err = err
	}
	return res
}

// callAsync sends a call on its own goroutine; the test reads the result from the
// returned channel, which also makes it wait for the goroutine.
func callAsync(nc *nats.Conn, op, id string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- call(nc, op, id, waitTimeout) }()
	return ch
}

// collector is a test actor that hands every message it receives to a channel.
type collector struct{ ch chan any }

func (c *collector) Receive(ctx *actor.Context) {
	switch ctx.Message().(type) {
	case actor.Initialized, actor.Started, actor.Stopped:
		return
	}
	c.ch <- ctx.Message()
}

type harness struct {
	t      *testing.T
	engine *actor.Engine
	inbox  chan any
	self   *actor.PID
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, engine: e, inbox: make(chan any, 1000)}
	h.self = e.Spawn(func() actor.Receiver { return &collector{ch: h.inbox} }, "collector")
	t.Cleanup(func() { h.poison(h.self) })
	return h
}

// poison stops an actor and waits for it, bounded.
func (h *harness) poison(pid *actor.PID) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	<-h.engine.PoisonCtx(ctx, pid).Done()
}

func (h *harness) send(to *actor.PID, msg any) { h.engine.SendWithSender(to, msg, h.self) }

// expect waits for the next reply and checks its type.
func expect[T any](h *harness) T {
	h.t.Helper()
	m := recv(h.t, h.inbox, "a role reply")
	v, ok := m.(T)
	if !ok {
		var zero T
		h.t.Fatalf("got %T %+v, want %T", m, m, zero)
	}
	return v
}
