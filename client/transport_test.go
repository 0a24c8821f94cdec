package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// broker starts a core NATS server and returns a connection for the client under test
// and another for the responders, which play the engines.
func broker(t *testing.T, opts ...natstest.Option) (client, engine *nats.Conn) {
	t.Helper()
	s := natstest.Start(t, append([]natstest.Option{natstest.WithoutJetStream()}, opts...)...)
	return natstest.Connect(t, s.URL()), natstest.Connect(t, s.URL())
}

func transport(t *testing.T, nc *nats.Conn, opts ...Option) *Transport {
	t.Helper()
	tr, err := NewTransport(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// reply answers m with data and the engine instance header.
func reply(t *testing.T, m *nats.Msg, data []byte) {
	out := nats.NewMsg(m.Reply)
	out.Data = data
	out.Header.Set(protocol.HeaderInstance, owner)
	if err := m.RespondMsg(out); err != nil {
		t.Errorf("respond on %s: %v", m.Subject, err)
	}
}

// replyError answers m the way an engine answers an error: our header, micro's headers and
// the envelope.
func replyError(t *testing.T, m *nats.Msg, e *protocol.Error) {
	body, err := json.Marshal(protocol.Envelope{Error: e})
	if err != nil {
		t.Fatal(err)
	}
	out := nats.NewMsg(m.Reply)
	out.Data = body
	out.Header.Set(protocol.HeaderInstance, owner)
	out.Header.Set(protocol.HeaderErrorCode, string(e.Code))
	out.Header.Set(micro.ErrorHeader, e.Message)
	out.Header.Set(micro.ErrorCodeHeader, "500")
	if err := m.RespondMsg(out); err != nil {
		t.Errorf("respond on %s: %v", m.Subject, err)
	}
}

// subscribeLater subscribes handler on subject (queue group queue) after delay, the way
// the next engine comes up during a handover. The returned channel yields the
// subscription error once it has happened.
func subscribeLater(t *testing.T, nc *nats.Conn, delay time.Duration, subject, queue string, handler nats.MsgHandler) <-chan error {
	done := make(chan error, 1)
	timer := time.AfterFunc(delay, func() {
		_, err := nc.QueueSubscribe(subject, queue, handler)
		done <- err
	})
	t.Cleanup(func() {
		if timer.Stop() {
			done <- errors.New("never subscribed")
		}
	})
	return done
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Done-when 1: a request waits for the next engine to subscribe.
func TestRequestWaitsForTheNextEngine(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn)
	const subject = "abi.svc.document.v1.get"
	subscribed := subscribeLater(t, en, 300*time.Millisecond, subject, "q", func(m *nats.Msg) { reply(t, m, []byte("pong")) })

	start := time.Now()
	r, err := tr.Request(withTimeout(t, 10*time.Second), subject, []byte("ping"), nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if err := <-subscribed; err != nil {
		t.Fatal(err)
	}
	if string(r.Data) != "pong" || r.Instance != owner {
		t.Fatalf("reply %q from %q, want pong from %s", r.Data, r.Instance, owner)
	}
	if elapsed < 300*time.Millisecond {
		t.Fatalf("answered after %s, before the responder subscribed at 300ms", elapsed)
	}
	if st := tr.Counters().Snapshot(); st.Retries == 0 || st.GiveUps != 0 || st.Calls != 1 {
		t.Fatalf("stats = %+v, want retries and no give-up", st)
	}
}

// Done-when 2: with nobody serving, the retry gives up after its window with "no
// responders", before the caller's deadline.
func TestNobodyServingGivesUpAfterTheWindow(t *testing.T) {
	cn, _ := broker(t)
	tr := transport(t, cn, WithRetryPolicy(RetryPolicy{
		Window: 300 * time.Millisecond, FirstDelay: 50 * time.Millisecond, MaxDelay: 500 * time.Millisecond, Margin: 500 * time.Millisecond,
	}))
	start := time.Now()
	_, err := tr.Request(withTimeout(t, 10*time.Second), "abi.svc.document.v1.get", nil, nil)
	elapsed := time.Since(start)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("err = %v, want no responders", err)
	}
	if elapsed < 300*time.Millisecond || elapsed > 2*time.Second {
		t.Fatalf("gave up after %s, want 0.3-2s", elapsed)
	}
	if st := tr.Counters().Snapshot(); st.GiveUps != 1 || st.Retries == 0 || st.Failures[protocol.Unavailable] != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestRetryEndsBeforeTheDeadline(t *testing.T) {
	cn, _ := broker(t)
	tr := transport(t, cn)
	start := time.Now()
	_, err := tr.Request(withTimeout(t, time.Second), "abi.svc.document.v1.get", nil, nil)
	elapsed := time.Since(start)
	if !errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want no responders and no timeout", err)
	}
	if elapsed >= time.Second {
		t.Fatalf("gave up after %s, at or after the caller's 1s deadline", elapsed)
	}
}

// Done-when 3: owner-scoped and instance subjects fail at once.
func TestInstanceSubjectsFailAtOnce(t *testing.T) {
	cn, _ := broker(t)
	tr := transport(t, cn)
	for _, subject := range []string{
		"abi.svc.object_storage.v1.transfer." + owner + ".read",
		"abi.svc.model_registry.v1." + owner + ".stream_next",
		"abi.discovery.default.v1.presence." + owner,
		"abi.agent.default.planner.v1.run",
		"abi.jobs.default.nightly",
	} {
		start := time.Now()
		_, err := tr.Request(withTimeout(t, 10*time.Second), subject, nil, nil)
		elapsed := time.Since(start)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("%s: err = %v, want no responders", subject, err)
		}
		if elapsed >= 200*time.Millisecond {
			t.Errorf("%s: failed after %s, want well under 200ms", subject, elapsed)
		}
	}
	if st := tr.Counters().Snapshot(); st.Retries != 0 || st.GiveUps != 0 {
		t.Fatalf("stats = %+v, want nothing retried", st)
	}
}

// Done-when 4: a transfer open waits for the next engine; the transfer's own reads do not.
func TestTransferOpenWaitsButSessionCallsDoNot(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn)
	prefix := protocol.TransferPrefix(protocol.ObjectStorage)
	sessionID := owner + ":fedcba9876543210fedcba9876543210"
	subscribed := subscribeLater(t, en, 300*time.Millisecond, prefix+".open", prefix+".owners", func(m *nats.Msg) {
		reply(t, m, []byte(`{"id":"`+sessionID+`"}`))
	})

	start := time.Now()
	r, err := tr.Request(withTimeout(t, 10*time.Second), prefix+".open", []byte(`{"operation":"get"}`), nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := <-subscribed; err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Fatalf("open answered after %s, before the host subscribed", elapsed)
	}
	var opened struct{ ID string }
	if err := json.Unmarshal(r.Data, &opened); err != nil || opened.ID != sessionID {
		t.Fatalf("open reply %q: %v", r.Data, err)
	}

	// The engine that opened the session is gone: its owner subject has no subscriber.
	start = time.Now()
	_, err = tr.Request(withTimeout(t, 10*time.Second), prefix+"."+owner+".read", []byte(`{"id":"`+sessionID+`","sequence":0}`), nil)
	if elapsed := time.Since(start); !errors.Is(err, nats.ErrNoResponders) || elapsed >= 200*time.Millisecond {
		t.Fatalf("read: err = %v after %s, want no responders well under 200ms", err, elapsed)
	}
}

func TestTimeoutIsNeverRetried(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn)
	const subject = "abi.svc.keyvalue.v1.set"
	var delivered atomic.Int32
	if _, err := en.QueueSubscribe(subject, "q", func(*nats.Msg) { delivered.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := en.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err := tr.Request(withTimeout(t, 300*time.Millisecond), subject, []byte("{}"), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, protocol.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	// A ping on the responder's connection comes back after every message routed to it.
	if err := en.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := delivered.Load(); n != 1 {
		t.Fatalf("the responder got the call %d times, want once", n)
	}
	if st := tr.Counters().Snapshot(); st.Retries != 0 || st.Failures[protocol.DeadlineExceeded] != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestFencedEngineIsRetriedUntilTheNextAnswers(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn)
	const subject = "abi.svc.keyvalue.v1.get"
	var delivered atomic.Int32
	if _, err := en.QueueSubscribe(subject, "q", func(m *nats.Msg) {
		if delivered.Add(1) <= 2 {
			replyError(t, m, protocol.Refused("engine fenced"))
			return
		}
		reply(t, m, []byte(`{"found":false}`))
	}); err != nil {
		t.Fatal(err)
	}
	// The subscription must be at the broker before the first call, or that call is a
	// "no responders" retry too.
	if err := en.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := tr.Request(withTimeout(t, 10*time.Second), subject, []byte(`{"key":"k"}`), nil)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if string(r.Data) != `{"found":false}` || delivered.Load() != 3 {
		t.Fatalf("reply %q after %d deliveries", r.Data, delivered.Load())
	}
	if st := tr.Counters().Snapshot(); st.Retries != 2 || st.Failures[protocol.Unavailable] != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestErrorRepliesDecode(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn)
	var delivered atomic.Int32
	handle := func(subject string, h nats.MsgHandler) {
		if _, err := en.QueueSubscribe(subject, "q", func(m *nats.Msg) { delivered.Add(1); h(m) }); err != nil {
			t.Fatal(err)
		}
	}
	handle("abi.svc.keyvalue.v1.envelope", func(m *nats.Msg) {
		replyError(t, m, &protocol.Error{Code: protocol.Conflict, Message: `key "a" changed`, Retryable: false})
	})
	handle("abi.svc.keyvalue.v1.header_only", func(m *nats.Msg) {
		out := nats.NewMsg(m.Reply)
		out.Data = []byte("not json")
		out.Header.Set(protocol.HeaderErrorCode, string(protocol.ResourceExhausted))
		out.Header.Set(micro.ErrorHeader, "too many calls")
		if err := m.RespondMsg(out); err != nil {
			t.Error(err)
		}
	})
	// A micro error without our envelope, as a handler crash inside micro produces.
	svc, err := micro.AddService(en, micro.Config{Name: "plain", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
	}()
	for name, code := range map[string]string{"missing": "404", "busy": "503", "crash": "500"} {
		if err := svc.AddEndpoint(name, micro.HandlerFunc(func(r micro.Request) {
			delivered.Add(1)
			if err := r.Error(code, "micro says "+code, nil); err != nil {
				t.Error(err)
			}
		}), micro.WithEndpointSubject("abi.svc.plain.v1."+name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := en.Flush(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		subject   string
		want      protocol.Error
		instance  string
		delivered int32
	}{
		{"abi.svc.keyvalue.v1.envelope", protocol.Error{Code: protocol.Conflict, Message: `key "a" changed`}, owner, 1},
		{"abi.svc.keyvalue.v1.header_only", protocol.Error{Code: protocol.ResourceExhausted, Message: "too many calls"}, "", 1},
		{"abi.svc.plain.v1.missing", protocol.Error{Code: protocol.NotFound, Message: "micro says 404"}, "", 1},
		// Not our envelope, so nothing says it did not run: not retried.
		{"abi.svc.plain.v1.busy", protocol.Error{Code: protocol.Unavailable, Message: "micro says 503"}, "", 1},
		{"abi.svc.plain.v1.crash", protocol.Error{Code: protocol.Internal, Message: "micro says 500"}, "", 1},
	} {
		delivered.Store(0)
		_, err := tr.Request(withTimeout(t, 10*time.Second), tc.subject, []byte("{}"), nil)
		var perr *protocol.Error
		if !errors.As(err, &perr) || *perr != tc.want {
			t.Errorf("%s: err = %v, want %+v", tc.subject, err, tc.want)
			continue
		}
		if !errors.Is(err, &protocol.Error{Code: tc.want.Code}) {
			t.Errorf("%s: errors.Is by code %s failed", tc.subject, tc.want.Code)
		}
		var ce *CallError
		if !errors.As(err, &ce) || ce.Instance != tc.instance || ce.Subject != tc.subject || ce.Cause != nil {
			t.Errorf("%s: call error %+v", tc.subject, ce)
		}
		if n := delivered.Load(); n != tc.delivered {
			t.Errorf("%s: delivered %d times, want %d", tc.subject, n, tc.delivered)
		}
	}
	st := tr.Counters().Snapshot()
	for code, n := range map[protocol.Code]uint64{protocol.Conflict: 1, protocol.ResourceExhausted: 1, protocol.NotFound: 1, protocol.Unavailable: 1, protocol.Internal: 1} {
		if st.Failures[code] != n {
			t.Errorf("failures[%s] = %d, want %d (stats %+v)", code, st.Failures[code], n, st)
		}
	}
}

func TestHeadersReachTheEngine(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn)
	const subject = "abi.svc.keyvalue.v1.exists"
	if _, err := en.QueueSubscribe(subject, "q", func(m *nats.Msg) {
		reply(t, m, []byte(m.Header.Get("traceparent")+"|"+string(m.Data)))
	}); err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	h.Set("traceparent", "00-abc-def-01")
	r, err := tr.Request(withTimeout(t, 10*time.Second), subject, []byte("body"), h)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Data) != "00-abc-def-01|body" || r.Header.Get(protocol.HeaderInstance) != owner {
		t.Fatalf("reply %q, headers %v", r.Data, r.Header)
	}
}
