package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

const owner = "0123456789abcdef0123456789abcdef"

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		subject string
		want    bool
	}{
		// Kernel services: queue-grouped, any serving engine answers.
		{"abi.svc.keyvalue.v1.get", true},
		{"abi.svc.object_storage.v1.put_object", true},
		{"abi.svc.document.v1.get", true},
		{"abi.svc.model_registry.v1.chat", true},
		{"abi.svc.cache.v1.tier.0.get", true},
		// Discovery, except presence.
		{"abi.discovery.default.v1.register", true},
		{"abi.discovery.my-project.v1.get_module", true},
		{"abi.discovery.default.v1.presence." + owner, false},
		{"abi.discovery.default.v1.presence.engine-1", false},
		// Transfers: only the open is queue-grouped.
		{"abi.svc.object_storage.v1.transfer.open", true},
		{"abi.svc.dataset.v1.transfer.open", true},
		{"abi.rpc.transfer.open", true},
		{"abi.svc.object_storage.v1.transfer." + owner + ".read", false},
		{"abi.svc.object_storage.v1.transfer." + owner + ".write", false},
		{"abi.svc.object_storage.v1.transfer." + owner + ".start", false},
		{"abi.svc.object_storage.v1.transfer." + owner + ".close", false},
		{"abi.svc.object_storage.v1.transfer." + owner + ".open", false},
		{"abi.svc.object_storage.v1.transfer.read", false},
		{"abi.svc.object_storage.v1.transfer.get", false},
		// Owner-scoped subjects under abi.svc. (docs/design.md §5.5).
		{"abi.svc.model_registry.v1." + owner + ".stream_next", false},
		{"abi.svc.model_registry.v1." + owner + ".stream_close", false},
		// Overflow sessions go to one engine.
		{"abi.rpc.overflow.open", false},
		{"abi.rpc.overflow." + owner + ".read", false},
		// Agents, jobs, inboxes, monitoring: one instance each.
		{"abi.agent.default.planner.v1.run", false},
		{"abi.jobs.default.nightly", false},
		{"_INBOX.abc.def", false},
		{"$SRV.PING", false},
		{"$SRV.INFO.keyvalue", false},
		// Not our shapes.
		{"abi.svc.keyvalue.v2.get", false},
		{"abi.svc.keyvalue.v1", false},
		{"abi.svc.keyvalue", false},
		{"abi.other.x.v1.get", false},
		{"svc.keyvalue.v1.get", false},
		{"", false},
		{"abi.svc..v1.get", false},
		{"abi.svc.keyvalue.v1.", false},
		{"abi.svc.keyvalue.v1.*", false},
		{"abi.svc.*.v1.get", false},
		{"abi.svc.keyvalue.v1.>", false},
		{"transfer.open", false},
		{".transfer.open", false},
		{"abi.svc.keyvalue.v1.ABCDEF0123456789abcdef0123456789", true}, // upper case: not an owner id
	} {
		if got := Retryable(tc.subject); got != tc.want {
			t.Errorf("Retryable(%q) = %v, want %v", tc.subject, got, tc.want)
		}
	}
}

func TestDelayDoublesUpToCap(t *testing.T) {
	p := DefaultRetryPolicy()
	want := []time.Duration{50, 100, 200, 400, 500, 500, 500}
	for i, w := range want {
		if got := p.Delay(i); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %s, want %s", i, got, w*time.Millisecond)
		}
	}
	if got := p.Delay(1000); got != 500*time.Millisecond {
		t.Errorf("Delay(1000) = %s, want the cap", got)
	}
}

func TestWindowFor(t *testing.T) {
	p := DefaultRetryPolicy()
	for _, tc := range []struct{ timeout, want time.Duration }{
		{10 * time.Second, 5 * time.Second},
		{5500 * time.Millisecond, 5 * time.Second},
		{3 * time.Second, 2500 * time.Millisecond},
		{time.Second, 500 * time.Millisecond},
		{500 * time.Millisecond, 0},
		{100 * time.Millisecond, 0},
		{0, 5 * time.Second},
	} {
		if got := p.WindowFor(tc.timeout); got != tc.want {
			t.Errorf("WindowFor(%s) = %s, want %s", tc.timeout, got, tc.want)
		}
	}
	off := p
	off.Window = 0
	if got := off.WindowFor(10 * time.Second); got != 0 {
		t.Errorf("disabled WindowFor = %s, want 0", got)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultRetryPolicy().Validate(); err != nil {
		t.Fatalf("default policy: %v", err)
	}
	if err := (RetryPolicy{}).Validate(); err != nil {
		t.Fatalf("zero policy (retry disabled): %v", err)
	}
	for name, p := range map[string]RetryPolicy{
		"negative window": {Window: -time.Second},
		"no first delay":  {Window: time.Second, MaxDelay: time.Second},
		"cap below first": {Window: time.Second, FirstDelay: time.Second, MaxDelay: time.Millisecond},
		"negative margin": {Window: time.Second, FirstDelay: time.Millisecond, MaxDelay: time.Second, Margin: -1},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, p)
		}
	}
	if _, err := newTransport(&scripted{}, WithRetryPolicy(RetryPolicy{Window: time.Second})); err == nil {
		t.Error("newTransport accepted a policy that would spin")
	}
	if _, err := newTransport(&scripted{}, WithDefaultTimeout(0)); err == nil {
		t.Error("newTransport accepted a zero default timeout")
	}
	if _, err := NewTransport(nil); err == nil {
		t.Error("NewTransport accepted a nil connection")
	}
}

// scripted is a conn that answers from a script and records when each attempt came, for
// the timing tests that run inside a synctest bubble (no network there).
type scripted struct {
	mu       sync.Mutex
	start    time.Time
	attempts []time.Duration
	answer   func(ctx context.Context, n int) (*nats.Msg, error) // n counts from 0
	timeouts []time.Duration                                     // of the attempts made without a context
}

func (s *scripted) RequestMsgWithContext(ctx context.Context, _ *nats.Msg) (*nats.Msg, error) {
	s.mu.Lock()
	n := len(s.attempts)
	s.attempts = append(s.attempts, time.Since(s.start))
	s.mu.Unlock()
	if s.answer == nil {
		return nil, nats.ErrNoResponders
	}
	return s.answer(ctx, n)
}

// RequestMsg is RequestMsgWithContext for a caller without a context: its answer
// gets a context bounded by timeout, and timeouts records the bound.
func (s *scripted) RequestMsg(m *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	s.mu.Lock()
	s.timeouts = append(s.timeouts, timeout)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.RequestMsgWithContext(ctx, m)
}

// RequestWithContext and Request are the two above for a request without headers.
func (s *scripted) RequestWithContext(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	return s.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: data})
}

func (s *scripted) Request(subject string, data []byte, timeout time.Duration) (*nats.Msg, error) {
	return s.RequestMsg(&nats.Msg{Subject: subject, Data: data}, timeout)
}

func (s *scripted) MaxPayload() int64 { return 1 << 20 }

func ms(ds ...int) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d) * time.Millisecond
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBackoffSchedule(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    []time.Duration
	}{
		// The Python SDK's schedule: 0, 0.05, 0.15, 0.35, 0.75, 1.25, 1.75, …, 4.75, 5.0 s, then give up.
		{"10s deadline", 10 * time.Second, ms(0, 50, 150, 350, 750, 1250, 1750, 2250, 2750, 3250, 3750, 4250, 4750, 5000)},
		// The window ends 0.5 s before the deadline; the last pause is cut short.
		{"1s deadline", time.Second, ms(0, 50, 150, 350, 500)},
		// No time left for a retry: one attempt.
		{"400ms deadline", 400 * time.Millisecond, ms(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &scripted{start: time.Now()}
				tr, err := newTransport(s)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), tc.timeout)
				defer cancel()
				_, err = tr.Request(ctx, "abi.svc.keyvalue.v1.get", nil, nil)
				if !errors.Is(err, nats.ErrNoResponders) || !errors.Is(err, protocol.ErrUnavailable) {
					t.Fatalf("err = %v, want no responders as UNAVAILABLE", err)
				}
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, the caller must not see a timeout", err)
				}
				if !equalDurations(s.attempts, tc.want) {
					t.Fatalf("attempts at %v, want %v", s.attempts, tc.want)
				}
				st := tr.Counters().Snapshot()
				wantGiveUps := uint64(1)
				if len(tc.want) == 1 {
					wantGiveUps = 0 // nothing was retried, so nothing was given up
				}
				if st.Retries != uint64(len(tc.want)-1) || st.GiveUps != wantGiveUps || st.Failures[protocol.Unavailable] != 1 || st.Calls != 1 ||
					st.NoResponders != uint64(len(tc.want)) {
					t.Fatalf("stats = %+v", st)
				}
			})
		})
	}
}

func TestBackoffWithoutDeadlineUsesDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{start: time.Now()}
		tr, err := newTransport(s, WithDefaultTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Request(context.Background(), "abi.svc.keyvalue.v1.get", nil, nil)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("err = %v", err)
		}
		if want := ms(0, 50, 150, 350, 750, 1250, 1500); !equalDurations(s.attempts, want) {
			t.Fatalf("attempts at %v, want %v", s.attempts, want)
		}
	})
}

// A call whose context can never end gets no context of its own: every attempt is
// bounded by the time left until the default deadline, and a reply that never comes
// still reads as context.DeadlineExceeded. A cancellable context still bounds its
// attempts itself.
func TestBackgroundCallMakesNoContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{start: time.Now()}
		tr, err := newTransport(s, WithDefaultTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = tr.Request(context.Background(), "abi.svc.keyvalue.v1.get", nil, nil)
		want := []time.Duration{2000, 1950, 1850, 1650, 1250, 750, 500}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if !equalDurations(s.timeouts, want) {
			t.Fatalf("attempts bounded by %v, want %v (the time left each time)", s.timeouts, want)
		}
		s = &scripted{start: time.Now(), answer: func(ctx context.Context, _ int) (*nats.Msg, error) {
			<-ctx.Done()
			return nil, nats.ErrTimeout // as nats.go's RequestMsg says it
		}}
		if tr, err = newTransport(s, WithDefaultTimeout(time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err = tr.Request(context.Background(), "abi.svc.keyvalue.v1.get", nil, nil)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, protocol.ErrDeadlineExceeded) || len(s.timeouts) != 1 {
			t.Fatalf("err = %v after %d attempts, want one DEADLINE_EXCEEDED matching context.DeadlineExceeded", err, len(s.timeouts))
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s = &scripted{start: time.Now()}
		if tr, err = newTransport(s, WithDefaultTimeout(time.Second)); err != nil {
			t.Fatal(err)
		}
		_, _ = tr.Request(ctx, "abi.svc.keyvalue.v1.get", nil, nil)
		if len(s.timeouts) != 0 || len(s.attempts) == 0 {
			t.Fatalf("a cancellable context: %d attempts, %d without it", len(s.attempts), len(s.timeouts))
		}
	})
}

func TestRetryDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{start: time.Now()}
		tr, err := newTransport(s, WithRetryPolicy(RetryPolicy{}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Request(t.Context(), "abi.svc.keyvalue.v1.get", nil, nil)
		if !errors.Is(err, nats.ErrNoResponders) || len(s.attempts) != 1 {
			t.Fatalf("err = %v after %d attempts, want no responders after 1", err, len(s.attempts))
		}
	})
}

func unavailable(retryable bool) *nats.Msg {
	m := nats.NewMsg("")
	m.Header.Set(protocol.HeaderErrorCode, string(protocol.Unavailable))
	m.Header.Set(protocol.HeaderInstance, owner)
	if retryable {
		m.Data = []byte(`{"error":{"code":"UNAVAILABLE","message":"engine fenced","retryable":true}}`)
	} else {
		m.Data = []byte(`{"error":{"code":"UNAVAILABLE","message":"backend down","retryable":false}}`)
	}
	return m
}

func TestFencedReplyIsRetriedLikeNoResponders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{start: time.Now(), answer: func(_ context.Context, n int) (*nats.Msg, error) {
			switch n {
			case 0:
				return nil, nats.ErrNoResponders
			case 1, 2:
				return unavailable(true), nil
			}
			m := nats.NewMsg("")
			m.Data = []byte("pong")
			m.Header.Set(protocol.HeaderInstance, owner)
			return m, nil
		}}
		tr, err := newTransport(s)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.Request(t.Context(), "abi.svc.keyvalue.v1.get", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Data) != "pong" || r.Instance != owner {
			t.Fatalf("reply %q from %q", r.Data, r.Instance)
		}
		if want := ms(0, 50, 150, 350); !equalDurations(s.attempts, want) {
			t.Fatalf("attempts at %v, want %v", s.attempts, want)
		}
		// One "no responders"; the fenced replies are retried but are not that.
		if st := tr.Counters().Snapshot(); st.Retries != 3 || st.Failures[protocol.Unavailable] != 0 || st.NoResponders != 1 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

func TestFencedUntilWindowEndsGivesUpWithEngineError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &scripted{start: time.Now(), answer: func(context.Context, int) (*nats.Msg, error) { return unavailable(true), nil }}
		tr, err := newTransport(s, WithRetryPolicy(RetryPolicy{Window: 300 * time.Millisecond, FirstDelay: 100 * time.Millisecond, MaxDelay: time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Request(t.Context(), "abi.svc.keyvalue.v1.get", nil, nil)
		var ce *CallError
		if !errors.As(err, &ce) || ce.Instance != owner || ce.Err.Message != "engine fenced" || !ce.Err.Retryable {
			t.Fatalf("err = %#v", err)
		}
		if want := ms(0, 100, 300); !equalDurations(s.attempts, want) {
			t.Fatalf("attempts at %v, want %v", s.attempts, want)
		}
		if st := tr.Counters().Snapshot(); st.GiveUps != 1 {
			t.Fatalf("stats = %+v", st)
		}
	})
}

func TestNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subject string
		answer  func(context.Context, int) (*nats.Msg, error)
		code    protocol.Code
	}{
		{"unavailable, not retryable", "abi.svc.keyvalue.v1.get",
			func(context.Context, int) (*nats.Msg, error) { return unavailable(false), nil }, protocol.Unavailable},
		{"fenced owner-scoped", "abi.svc.object_storage.v1.transfer." + owner + ".read",
			func(context.Context, int) (*nats.Msg, error) { return unavailable(true), nil }, protocol.Unavailable},
		{"timeout", "abi.svc.keyvalue.v1.get",
			func(ctx context.Context, _ int) (*nats.Msg, error) { <-ctx.Done(); return nil, ctx.Err() }, protocol.DeadlineExceeded},
		{"connection closed", "abi.svc.keyvalue.v1.get",
			func(context.Context, int) (*nats.Msg, error) { return nil, nats.ErrConnectionClosed }, protocol.Unavailable},
		{"too large", "abi.svc.keyvalue.v1.get",
			func(context.Context, int) (*nats.Msg, error) { return nil, nats.ErrMaxPayload }, protocol.PayloadTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &scripted{start: time.Now(), answer: tc.answer}
				tr, err := newTransport(s)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				_, err = tr.Request(ctx, tc.subject, nil, nil)
				if protocol.CodeOf(err) != tc.code || len(s.attempts) != 1 {
					t.Fatalf("err = %v after %d attempts, want %s after 1", err, len(s.attempts), tc.code)
				}
				if !strings.Contains(err.Error(), tc.subject) {
					t.Errorf("error %q does not name the subject", err)
				}
				if st := tr.Counters().Snapshot(); st.Failures[tc.code] != 1 || st.Retries != 0 {
					t.Fatalf("stats = %+v", st)
				}
			})
		})
	}
}

func TestCancelDuringPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s := &scripted{start: time.Now(), answer: func(_ context.Context, n int) (*nats.Msg, error) {
			if n == 2 {
				cancel()
			}
			return nil, nats.ErrNoResponders
		}}
		tr, err := newTransport(s)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Request(ctx, "abi.svc.keyvalue.v1.get", nil, nil)
		if !errors.Is(err, context.Canceled) || len(s.attempts) != 3 {
			t.Fatalf("err = %v after %d attempts, want cancelled after 3", err, len(s.attempts))
		}
	})
}

// The broker's "no responders" is counted once per attempt that got it, on any subject,
// and a reply counts nothing: a user (and the zero-gap handover test) reads it.
func TestNoRespondersAreCounted(t *testing.T) {
	cn, en := broker(t)
	tr := transport(t, cn, WithRetryPolicy(RetryPolicy{}))
	if _, err := tr.Request(withTimeout(t, 5*time.Second), "abi.svc.document.v1.get", nil, nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("err = %v, want no responders", err)
	}
	if _, err := tr.Request(withTimeout(t, 5*time.Second), "abi.agent.default.planner.v1.run", nil, nil); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("err = %v, want no responders", err)
	}
	sub, err := en.QueueSubscribe("abi.svc.document.v1.get", "q", func(m *nats.Msg) { reply(t, m, []byte("pong")) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := en.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Request(withTimeout(t, 5*time.Second), "abi.svc.document.v1.get", nil, nil); err != nil {
		t.Fatal(err)
	}
	if st := tr.Counters().Snapshot(); st.NoResponders != 2 || st.Calls != 3 {
		t.Fatalf("stats = %+v, want 2 no responders in 3 calls", st)
	}
}
