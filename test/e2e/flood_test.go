package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
)

// TestAFloodOfLargeRequestsGetsAnAnswerForEach is issue 15's back-pressure: one
// connection sends 3,000 keyvalue sets of ~130 KB at once. Every request gets an answer,
// success or a retryable RESOURCE_EXHAUSTED, and the drops, if any, are counted by
// abi_engine_dropped_messages_total. Before, the primary's callback waited for a slot
// while the rest piled up in the subscription's buffer: 1,908 of 3,000 were dropped
// silently (a bare "slow consumer" line, no metric, no reply).
func TestAFloodOfLargeRequestsGetsAnAnswerForEach(t *testing.T) {
	const (
		requests = 3000
		valueLen = 97 << 10 // ~130 KB once base64 in JSON
	)
	srv := natstest.Start(t)
	// A lease long enough that a machine loaded by the flood (and other tests) does not
	// fence the engine; if it does, its refusals are retryable UNAVAILABLE, accepted.
	p := start(t, "engine", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t), Lease: 10,
		// One call at a time, so the engine falls behind the flood for certain.
		NATSYAML: "  max_concurrent_requests: 1\n"})
	p.waitState("serving", 20*time.Second)

	nc := natstest.Connect(t, srv.URL())
	value := base64.StdEncoding.EncodeToString(make([]byte, valueLen))
	inbox := nats.NewInbox()
	var (
		mu    sync.Mutex
		codes = map[string]int{}
		seen  = map[string]bool{}
		all   = make(chan struct{})
	)
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		code := m.Header.Get(protocol.HeaderErrorCode)
		if code == "" {
			code = "OK"
		} else {
			var env protocol.Envelope
			if json.Unmarshal(m.Data, &env) == nil && env.Error != nil && !env.Error.Retryable {
				code += " (not retryable)"
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[m.Subject] {
			seen[m.Subject] = true
			codes[code]++
			if len(seen) == requests {
				close(all)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil { // the test's side must drop nothing
		t.Fatal(err)
	}
	subject := protocol.ServiceSubject("keyvalue", "set")
	began := time.Now()
	for i := range requests {
		body := fmt.Sprintf(`{"key":"k%d","value":%q}`, i, value)
		if err := nc.PublishRequest(subject, fmt.Sprintf("%s.%d", inbox, i), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(60 * time.Second):
	}
	mu.Lock()
	answered, got := len(seen), fmt.Sprint(codes)
	mu.Unlock()
	dropped := max(0, p.metric(t, `abi_engine_dropped_messages_total{subject="`+subject+`"}`)) // -1: none counted
	t.Logf("%d requests of %d KB from one connection in %s: answers %s, dropped %g", requests, len(value)>>10, time.Since(began).Round(time.Millisecond), got, dropped)
	if answered+int(dropped) < requests {
		t.Fatalf("%d of %d requests got no answer and only %g drops were counted; answers %s", requests-answered, requests, dropped, got)
	}
	if answered < requests {
		t.Errorf("%d requests were dropped (counted); the engine should have refused them", requests-answered)
	}
	for code := range codes {
		// UNAVAILABLE, retryable, is a lease check that failed under load: nothing ran.
		if code != "OK" && code != string(protocol.ResourceExhausted) && code != string(protocol.Unavailable) {
			t.Errorf("answers %s: %s is neither success nor a retryable refusal", got, code)
		}
	}
	if strings.Contains(p.out.String(), "slow consumer, messages dropped") {
		t.Errorf("the engine printed nats.go's bare slow-consumer line")
	}
}

// TestAFloodFromManyConnectionsGetsAnAnswerForEach is issue 26's flood: 20 connections
// send 100,000 small keyvalue sets at once. Every call is answered, success or a
// retryable RESOURCE_EXHAUSTED, none times out. Before, 21,526 calls got no reply at all:
// they were dropped at the endpoint subscription's pending limit (65,536 messages)
// before the callback could refuse them.
func TestAFloodFromManyConnectionsGetsAnAnswerForEach(t *testing.T) {
	const (
		conns   = 20
		perConn = 5000
		total   = conns * perConn
	)
	if raceDetector {
		// The broker runs in this process: with the race detector it is so slow that
		// the engine's JetStream writes run out of time (DEADLINE_EXCEEDED answers).
		// The engine process is built without it either way; CI runs this test in its
		// pass with the fail points, which has no race detector.
		t.Skip("without the race detector only: the broker in this process is too slow with it")
	}
	srv := natstest.Start(t)
	p := start(t, "engine", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t), Lease: 10})
	p.waitState("serving", 20*time.Second)

	var (
		mu    sync.Mutex
		codes = map[string]int{}
		seen  = map[string]bool{}
		all   = make(chan struct{})
	)
	count := func(m *nats.Msg) {
		code := m.Header.Get(protocol.HeaderErrorCode)
		if code == "" {
			code = "OK"
		} else {
			var env protocol.Envelope
			if json.Unmarshal(m.Data, &env) == nil && env.Error != nil && !env.Error.Retryable {
				code += " (not retryable)"
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[m.Subject] {
			seen[m.Subject] = true
			codes[code]++
			if len(seen) == total {
				close(all)
			}
		}
	}
	subject := protocol.ServiceSubject("keyvalue", "set")
	senders := make([]*nats.Conn, conns)
	inboxes := make([]string, conns)
	for c := range conns {
		nc := natstest.Connect(t, srv.URL())
		inboxes[c] = nats.NewInbox()
		sub, err := nc.Subscribe(inboxes[c]+".*", count)
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil { // the test's side must drop nothing
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		senders[c] = nc
	}
	began := time.Now()
	var wg sync.WaitGroup
	for c, nc := range senders {
		wg.Go(func() {
			for i := range perConn {
				body := fmt.Sprintf(`{"key":"flood-%d-%d","value":"aGk="}`, c, i)
				if err := nc.PublishRequest(subject, fmt.Sprintf("%s.%d", inboxes[c], i), []byte(body)); err != nil {
					t.Error(err)
					return
				}
			}
			if err := nc.Flush(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	sent := time.Since(began)
	select {
	case <-all:
	case <-time.After(60 * time.Second):
	}
	mu.Lock()
	answered, got := len(seen), fmt.Sprint(codes)
	mu.Unlock()
	dropped := max(0, p.metric(t, `abi_engine_dropped_messages_total{subject="`+subject+`"}`))
	t.Logf("%d sets from %d connections sent in %s, answered in %s: %s; dropped (counted) %g; engine peak RSS %d MiB",
		total, conns, sent.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), got, dropped, procKiB(t, p.cmd.Process.Pid, "VmHWM")>>10)
	if answered < total {
		t.Errorf("%d of %d calls got no answer within 60 s (%g counted as dropped); answers %s", total-answered, total, dropped, got)
	}
	for code := range codes {
		if code != "OK" && code != string(protocol.ResourceExhausted) {
			t.Errorf("answers %s: %s is neither success nor a retryable RESOURCE_EXHAUSTED", got, code)
		}
	}
	if out := p.out.String(); strings.Contains(out, "slow consumer") || strings.Contains(out, "disconnected") {
		t.Errorf("the engine fell behind its connection during the flood:\n%s", out)
	}
}
