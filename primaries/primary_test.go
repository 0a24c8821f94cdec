package primaries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/abi-engine/engine/internal/testwait"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// Calls received before a handover (one running, one queued) are answered by the old
// primary, while calls sent after it stopped accepting reach the next one; none is
// cancelled. The old primary is driven by role messages, as the root actor drives it.
func TestHandoverAnswersReceivedCallsAndRoutesNewOnes(t *testing.T) {
	srv := natstest.Start(t)
	ncA, ncB, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	oldSvc, newSvc := newGated("old"), newGated("new")
	newSvc.open()
	a := newPrimary(t, ncA, oldSvc.service(), "engine-a", 1, alwaysValid)
	b := newPrimary(t, ncB, newSvc.service(), "engine-b", 4, alwaysValid)

	h := newHarness(t)
	pid := h.engine.Spawn(a.Producer(), "primary", actor.WithID("test_svc"))
	t.Cleanup(func() { h.poison(pid) })
	h.send(pid, actors.Serve{})
	if acc := expect[actors.Accepting](h); !acc.On || !acc.From.Equals(pid) {
		t.Fatalf("Serve answered %+v", acc)
	}

	first := callAsync(client, "work", "1")
	if id := recv(t, oldSvc.started, "call 1 to start"); id != "1" {
		t.Fatalf("started %q", id)
	}
	second := callAsync(client, "work", "2")
	// One slot: call 2 is received (counted) but waits for call 1.
	testwait.For(t, waitTimeout, "call 2 to be received", func() bool { return a.InFlight() == 2 })

	serve(t, b)
	h.send(pid, actors.StopAccepting{Deadline: time.Now().Add(time.Minute)})
	if acc := expect[actors.Accepting](h); acc.On {
		t.Fatalf("StopAccepting answered %+v", acc)
	}
	for i := 3; i <= 7; i++ {
		r := call(client, "work", strconv.Itoa(i), waitTimeout)
		if r.err != nil || r.werr != nil || r.rep.By != "new" || r.instance() != "engine-b" {
			t.Fatalf("call %d after the handover: %+v (instance %q)", i, r, r.instance())
		}
	}
	select {
	case m := <-h.inbox:
		t.Fatalf("drained while calls 1 and 2 were open: %+v", m)
	default:
	}

	oldSvc.open()
	for _, ch := range []<-chan result{first, second} {
		r := recv(t, ch, "an old call's reply")
		if r.err != nil || r.werr != nil || r.rep.By != "old" || r.instance() != "engine-a" {
			t.Fatalf("call %s: %+v (instance %q)", r.id, r, r.instance())
		}
		if cause := oldSvc.cancelledCause(r.id); cause != nil {
			t.Fatalf("call %s was cancelled: %v", r.id, cause)
		}
	}
	expect[actors.Drained](h)
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
}

// The same handover through the sessions.Host methods, which the handover's
// wait-for-sessions uses.
func TestHostWaitsForReceivedCalls(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old")
	p := newPrimary(t, nc, g.service(), "engine-a", 1, alwaysValid)
	serve(t, p)

	first := callAsync(client, "work", "1")
	recv(t, g.started, "call 1 to start")
	second := callAsync(client, "work", "2")
	testwait.For(t, waitTimeout, "call 2 to be received", func() bool { return p.InFlight() == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := p.StopAccepting(ctx); err != nil {
		t.Fatal(err)
	}
	if r := call(client, "echo", "3", waitTimeout); !errors.Is(r.err, nats.ErrNoResponders) {
		t.Fatalf("call after StopAccepting: %+v, want no responders", r)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := p.SessionsFinished(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SessionsFinished with calls open = %v, want the context's error", err)
	}
	g.open()
	for _, ch := range []<-chan result{first, second} {
		if r := recv(t, ch, "a reply"); r.err != nil || r.werr != nil || r.rep.By != "old" {
			t.Fatalf("call %s: %+v", r.id, r)
		}
	}
	if err := p.SessionsFinished(ctx); err != nil {
		t.Fatal(err)
	}
	if n := p.InFlight(); n != 0 {
		t.Fatalf("InFlight = %d after SessionsFinished", n)
	}
	p.Stop()
	p.Stop() // twice is fine
}

// A call still running at the drain deadline is cancelled, and Drained follows.
func TestDrainDeadlineCancelsRunningCalls(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old") // never opened: the call runs until its context ends
	p := newPrimary(t, nc, g.service(), "engine-a", 4, alwaysValid)
	h := newHarness(t)
	pid := h.engine.Spawn(p.Producer(), "primary", actor.WithID("test_svc"))
	t.Cleanup(func() { h.poison(pid) })
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)

	stuck := callAsync(client, "work", "1")
	recv(t, g.started, "the call to start")
	h.send(pid, actors.StopAccepting{Deadline: time.Now().Add(200 * time.Millisecond)})
	if acc := expect[actors.Accepting](h); acc.On {
		t.Fatalf("got %+v", acc)
	}
	expect[actors.Drained](h)
	if cause := g.cancelledCause("1"); !errors.Is(cause, errDrainDeadline) {
		t.Fatalf("call cause = %v, want the drain deadline", cause)
	}
	r := recv(t, stuck, "the cancelled call's reply")
	if r.werr == nil || r.werr.Code != protocol.Unavailable || r.werr.Retryable {
		t.Fatalf("cancelled call answered %+v; want UNAVAILABLE, not retryable (it may have run)", r)
	}
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
}

// A read-only operation stopped while it runs changed nothing: its caller gets a
// retryable UNAVAILABLE and resends it, where a write stopped the same way is answered
// "it may have taken effect".
func TestStoppedReadIsRetryable(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old")
	svc := g.service()
	svc.Operations["work"] = ReadOnly(svc.Operations["work"])
	p := newPrimary(t, nc, svc, "engine-a", 1, alwaysValid)
	h := newHarness(t)
	pid := h.engine.Spawn(p.Producer(), "primary", actor.WithID("test_svc"))
	t.Cleanup(func() { h.poison(pid) })
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)

	running := callAsync(client, "work", "1")
	recv(t, g.started, "the read to start")
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
	r := recv(t, running, "the stopped read")
	if r.werr == nil || r.werr.Code != protocol.Unavailable || !r.werr.Retryable {
		t.Fatalf("a read stopped while it ran answered %+v; want UNAVAILABLE retryable", r)
	}
}

// Stop cancels running calls at once, and the next request gets "no responders".
func TestStopCancelsAtOnce(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old")
	p := newPrimary(t, nc, g.service(), "engine-a", 1, alwaysValid)
	h := newHarness(t)
	pid := h.engine.Spawn(p.Producer(), "primary", actor.WithID("test_svc"))
	t.Cleanup(func() { h.poison(pid) })
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)

	running := callAsync(client, "work", "1")
	recv(t, g.started, "call 1 to start")
	queued := callAsync(client, "work", "2")
	testwait.For(t, waitTimeout, "call 2 to be received", func() bool { return p.InFlight() == 2 })

	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
	r1, r2 := recv(t, running, "call 1"), recv(t, queued, "call 2")
	if cause := g.cancelledCause("1"); !errors.Is(cause, errStopped) {
		t.Fatalf("running call cause = %v, want stopped", cause)
	}
	if r1.werr == nil || r1.werr.Code != protocol.Unavailable || r1.werr.Retryable {
		t.Fatalf("running call answered %+v", r1)
	}
	if r2.werr == nil || r2.werr.Code != protocol.Unavailable || !r2.werr.Retryable {
		t.Fatalf("queued call answered %+v; want UNAVAILABLE retryable (it never ran)", r2)
	}
	select {
	case id := <-g.started:
		t.Fatalf("call %s ran after Stop", id)
	default:
	}
	if r := call(client, "echo", "3", waitTimeout); !errors.Is(r.err, nats.ErrNoResponders) {
		t.Fatalf("call after Down: %+v, want no responders", r)
	}

	// A fenced primary whose renewal succeeded serves again.
	h.send(pid, actors.Serve{})
	if acc := expect[actors.Accepting](h); !acc.On {
		t.Fatalf("Serve after Stop answered %+v", acc)
	}
	if r := call(client, "echo", "4", waitTimeout); r.err != nil || r.werr != nil || r.rep.ID != "4" {
		t.Fatalf("call after serving again: %+v", r)
	}
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
}

// events is a test actor subscribed to the engine's event stream; it hands over the
// Restarted events of actors.Recover.
type events struct{ ch chan actors.Restarted }

func (e *events) Receive(c *actor.Context) {
	if r, ok := c.Message().(actors.Restarted); ok {
		e.ch <- r
	}
}

// Killing the primary's actor under traffic fails no call: the calls never go through
// the actor, and the actor after the kill (restarted in place by actors.Recover, or a
// fresh instance from the same producer) picks up the Primary, including a drain that
// was under way and the replies it owes.
func TestKillingTheActorUnderTrafficLosesNoCall(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("old")
	p := newPrimary(t, nc, g.service(), "engine-a", 8, alwaysValid)
	h := newHarness(t)
	restarted := make(chan actors.Restarted, 10)
	ev := h.engine.Spawn(func() actor.Receiver { return &events{ch: restarted} }, "events")
	h.engine.Subscribe(ev)
	t.Cleanup(func() {
		h.engine.Unsubscribe(ev)
		h.poison(ev)
	})
	var instances atomic.Int32
	produce := func() actor.Receiver {
		instances.Add(1)
		return p.Producer()()
	}
	pid := h.engine.Spawn(produce, "primary", actors.SpawnOpts("test_svc")...)
	h.send(pid, actors.Serve{})
	expect[actors.Accepting](h)

	// Traffic: 8 callers until told to stop.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := call(client, "echo", fmt.Sprintf("%d-%d", w, i), waitTimeout)
				if r.err != nil || r.werr != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%+v", r))
					continue
				}
				ok.Add(1)
			}
		})
	}
	progress := func() {
		t.Helper()
		target := ok.Load() + 50
		testwait.For(t, waitTimeout, "traffic to progress", func() bool { return ok.Load() >= target })
	}

	for range 3 {
		progress()
		h.engine.Send(pid, actors.Kill{Reason: "test"})
		recv(t, restarted, "the actor to restart")
	}
	progress()
	// A harder kill: the actor is gone and the spawner starts a fresh instance.
	h.poison(pid)
	progress()
	pid = h.engine.Spawn(produce, "primary", actors.SpawnOpts("test_svc")...)
	if n := instances.Load(); n != 2 {
		t.Fatalf("%d actor instances, want 2", n)
	}
	progress()
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed while the actor was killed; first: %v", failed.Load(), ok.Load()+failed.Load(), firstErr.Load())
	}

	// A drain under way survives kills: the actor after them sends the replies.
	held := callAsync(client, "work", "held")
	recv(t, g.started, "the held call to start")
	h.send(pid, actors.StopAccepting{Deadline: time.Now().Add(time.Minute)})
	expect[actors.Accepting](h)
	h.engine.Send(pid, actors.Kill{Reason: "test"})
	recv(t, restarted, "the actor to restart")
	h.poison(pid)
	pid = h.engine.Spawn(produce, "primary", actors.SpawnOpts("test_svc")...)
	g.open()
	if r := recv(t, held, "the held call"); r.err != nil || r.werr != nil {
		t.Fatalf("held call: %+v", r)
	}
	if d := expect[actors.Drained](h); !d.From.Equals(pid) {
		t.Fatalf("Drained from %v, want %v", d.From, pid)
	}
	h.send(pid, actors.Stop{})
	expect[actors.Down](h)
	h.poison(pid)
}

// Never more than MaxConcurrent handlers run at once, and every call is answered.
func TestBoundedConcurrency(t *testing.T) {
	const limit, calls = 3, 24
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	var running, peak atomic.Int32
	started := make(chan struct{}, calls)
	gate := make(chan struct{})
	svc := Service{Name: "test_svc", Operations: map[string]Operation{}}
	// Two endpoints: micro runs one callback per endpoint at a time, so the limit must
	// hold across endpoints, where micro alone would run two at once.
	for _, op := range []string{"work", "echo"} {
		svc.Operations[op] = Handle(func(ctx context.Context, r *workReq) (workRep, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			started <- struct{}{}
			<-gate
			return workRep{ID: r.ID}, nil
		})
	}
	p := newPrimary(t, nc, svc, "engine-a", limit, alwaysValid)
	serve(t, p)

	var results []<-chan result
	for i := range calls {
		op := []string{"work", "echo"}[i%2]
		results = append(results, callAsync(client, op, strconv.Itoa(i)))
	}
	for range limit {
		recv(t, started, "a call to start")
	}
	// Both endpoints have a call waiting for a slot once 2 more are received.
	testwait.For(t, waitTimeout, "calls waiting for a slot", func() bool { return p.InFlight() >= limit+2 })
	if n := running.Load(); n != limit {
		t.Fatalf("%d calls run, want %d", n, limit)
	}
	close(gate)
	for _, ch := range results {
		if r := recv(t, ch, "a reply"); r.err != nil || r.werr != nil {
			t.Fatalf("call %s: %+v", r.id, r)
		}
	}
	if got := peak.Load(); got != limit {
		t.Fatalf("peak concurrency %d, want exactly %d", got, limit)
	}
}

// When the lease check says invalid, the call is answered UNAVAILABLE retryable and the
// handler does not run.
func TestLeaseInvalidRefusesWithoutRunning(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	var valid atomic.Bool
	var ran atomic.Int32
	svc := Service{Name: "test_svc", Operations: map[string]Operation{
		"echo": Handle(func(_ context.Context, r *workReq) (workRep, error) {
			ran.Add(1)
			return workRep{ID: r.ID}, nil
		}),
	}}
	p := newPrimary(t, nc, svc, "engine-a", 4, valid.Load)
	serve(t, p)

	r := call(client, "echo", "1", waitTimeout)
	if r.werr == nil || r.werr.Code != protocol.Unavailable || !r.werr.Retryable {
		t.Fatalf("reply %+v, want UNAVAILABLE retryable", r)
	}
	checkErrorHeaders(t, r.msg, protocol.Unavailable, "engine-a")
	if n := ran.Load(); n != 0 {
		t.Fatalf("handler ran %d times", n)
	}
	valid.Store(true)
	if r := call(client, "echo", "2", waitTimeout); r.err != nil || r.werr != nil || ran.Load() != 1 {
		t.Fatalf("with a valid lease: %+v, ran %d", r, ran.Load())
	}
}

func checkErrorHeaders(t *testing.T, m *nats.Msg, code protocol.Code, instance string) {
	t.Helper()
	if got := m.Header.Get(protocol.HeaderErrorCode); got != string(code) {
		t.Errorf("%s = %q, want %s", protocol.HeaderErrorCode, got, code)
	}
	if got := m.Header.Get(micro.ErrorCodeHeader); got != strconv.Itoa(code.HTTPStatus()) {
		t.Errorf("%s = %q, want %d", micro.ErrorCodeHeader, got, code.HTTPStatus())
	}
	if m.Header.Get(micro.ErrorHeader) == "" {
		t.Errorf("%s is empty", micro.ErrorHeader)
	}
	if got := m.Header.Get(protocol.HeaderInstance); got != instance {
		t.Errorf("%s = %q, want %q", protocol.HeaderInstance, got, instance)
	}
}

// Replies carry the instance header; errors carry the envelope; bad bodies name what
// was wrong; timeout_ms bounds the call; a panicking operation is an INTERNAL error.
func TestRepliesAndErrors(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	svc := Service{Name: "test_svc", Operations: map[string]Operation{
		"echo": Handle(func(_ context.Context, r *workReq) (workRep, error) { return workRep{ID: r.ID}, nil }),
		"wait": Handle(func(ctx context.Context, _ *workReq) (workRep, error) {
			<-ctx.Done()
			return workRep{}, ctx.Err()
		}),
		"panic": Handle(func(context.Context, *workReq) (workRep, error) { panic("bug") }),
		"notfound": Handle(func(_ context.Context, r *workReq) (workRep, error) {
			return workRep{}, protocol.Errorf(protocol.NotFound, "no %q", r.ID)
		}),
	}}
	p := newPrimary(t, nc, svc, "engine-a", 4, alwaysValid)
	serve(t, p)

	r := call(client, "echo", "x", waitTimeout)
	if r.err != nil || r.werr != nil || r.rep.ID != "x" || r.instance() != "engine-a" {
		t.Fatalf("echo: %+v", r)
	}

	raw := func(op string, body string) (*nats.Msg, *protocol.Error) {
		t.Helper()
		m, err := client.Request(protocol.ServiceSubject("test_svc", op), []byte(body), waitTimeout)
		if err != nil {
			t.Fatal(err)
		}
		var env protocol.Envelope
		if err := json.Unmarshal(m.Data, &env); err != nil || env.Error == nil {
			t.Fatalf("%s %s: no envelope in %q", op, body, m.Data)
		}
		return m, env.Error
	}
	for _, c := range []struct {
		body, want string
	}{
		{`{"id":`, "not valid JSON"},
		{`[1]`, "must be a JSON object, got an array"},
		{`{"id":5}`, `member "id" must be a string, got a number`},
		{"{\"id\":\"\xff\"}", "not valid UTF-8"},
		{`{"id":"x","context":{"timeout_ms":-1}}`, "timeout_ms must not be negative"},
	} {
		m, e := raw("echo", c.body)
		if e.Code != protocol.InvalidArgument || e.Retryable || !strings.Contains(e.Message, c.want) {
			t.Errorf("body %s: %+v, want INVALID_ARGUMENT saying %q", c.body, e, c.want)
		}
		checkErrorHeaders(t, m, protocol.InvalidArgument, "engine-a")
	}

	m, e := raw("wait", `{"id":"x","context":{"timeout_ms":20}}`)
	if e.Code != protocol.DeadlineExceeded {
		t.Errorf("timeout_ms: %+v", e)
	}
	checkErrorHeaders(t, m, protocol.DeadlineExceeded, "engine-a")
	if _, e := raw("panic", `{}`); e.Code != protocol.Internal || !strings.Contains(e.Message, "bug") {
		t.Errorf("panic: %+v", e)
	}
	if _, e := raw("notfound", `{"id":"k"}`); e.Code != protocol.NotFound || e.Message != `no "k"` {
		t.Errorf("notfound: %+v", e)
	}
}

// micro's monitoring verbs answer for the service: name, version, endpoints, queue group.
func TestMicroDiscovery(t *testing.T) {
	srv := natstest.Start(t)
	nc, client := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	g := newGated("x")
	p := newPrimary(t, nc, g.service(), "engine-a", 4, alwaysValid)
	serve(t, p)

	m, err := client.Request("$SRV.INFO.test_svc", nil, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != "test_svc" || info.Version != "1.0.0" || len(info.Endpoints) != 2 {
		t.Fatalf("info %+v", info)
	}
	for _, ep := range info.Endpoints {
		if ep.Subject != protocol.ServiceSubject("test_svc", ep.Name) || ep.QueueGroup != micro.DefaultQueueGroup {
			t.Errorf("endpoint %+v", ep)
		}
	}
	if _, err := client.Request("$SRV.PING", nil, waitTimeout); err != nil {
		t.Fatal(err)
	}
	m, err = client.Request("$SRV.STATS.test_svc", nil, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(m.Data, &stats); err != nil || len(stats.Endpoints) != 2 {
		t.Fatalf("stats %s: %v", m.Data, err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	good := newGated("x").service()
	cfg := Config{Conn: nc, InstanceID: "i", MaxConcurrent: 1, LeaseValid: alwaysValid}
	for name, c := range map[string]struct {
		svc Service
		cfg Config
	}{
		"no conn":        {good, Config{InstanceID: "i", MaxConcurrent: 1, LeaseValid: alwaysValid}},
		"no instance":    {good, Config{Conn: nc, MaxConcurrent: 1, LeaseValid: alwaysValid}},
		"zero limit":     {good, Config{Conn: nc, InstanceID: "i", LeaseValid: alwaysValid}},
		"limit too high": {good, Config{Conn: nc, InstanceID: "i", MaxConcurrent: MaxConcurrentLimit + 1, LeaseValid: alwaysValid}},
		"no lease check": {good, Config{Conn: nc, InstanceID: "i", MaxConcurrent: 1}},
		"no name":        {Service{Operations: good.Operations}, cfg},
		"no operations":  {Service{Name: "x"}, cfg},
		"nil operation":  {Service{Name: "x", Operations: map[string]Operation{"a": nil}}, cfg},
	} {
		if _, err := New(c.svc, c.cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
