package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go"
)

const responderID = "0123456789abcdef0123456789abcdef"

// keyvalueGetResponder answers abi.svc.keyvalue.v1.get on the queue group an engine
// uses: found for "greeting", not found for other keys, INVALID_ARGUMENT for an empty
// key. It records the requests it received.
type keyvalueGetResponder struct {
	mu       sync.Mutex
	requests []string
}

func (r *keyvalueGetResponder) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

func startResponder(t *testing.T, url string) *keyvalueGetResponder {
	t.Helper()
	nc := natstest.Connect(t, url)
	r := &keyvalueGetResponder{}
	_, err := nc.QueueSubscribe(protocol.ServiceSubject(protocol.KeyValue, "get"), "q", func(m *nats.Msg) {
		r.mu.Lock()
		r.requests = append(r.requests, string(m.Data))
		r.mu.Unlock()
		reply := nats.NewMsg(m.Reply)
		reply.Header.Set(protocol.HeaderInstance, responderID)
		var req protocol.KVKeyRequest
		switch err := json.Unmarshal(m.Data, &req); {
		case err != nil || req.Key == "":
			reply.Header.Set(protocol.HeaderErrorCode, string(protocol.InvalidArgument))
			reply.Data, _ = json.Marshal(protocol.Envelope{Error: protocol.Errorf(protocol.InvalidArgument, "key must not be empty")})
		case req.Key == "greeting":
			reply.Data, _ = json.Marshal(protocol.KVGetReply{Found: true, Value: []byte("hello")})
		default:
			reply.Data, _ = json.Marshal(protocol.KVGetReply{})
		}
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCallPrintsReplyAndInstance(t *testing.T) {
	srv := natstest.Start(t)
	resp := startResponder(t, srv.URL())

	r := runCLI(t, nil, "call", "keyvalue", "get", `{"key":"greeting"}`, "--nats", srv.URL())
	wantCode(t, r, exitOK)
	var got protocol.KVGetReply
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || !got.Found || string(got.Value) != "hello" {
		t.Errorf("stdout %q: want the reply body found=true value=hello (err %v)", r.stdout, err)
	}
	if !strings.HasSuffix(r.stdout, "\n") {
		t.Errorf("stdout %q does not end with a newline", r.stdout)
	}
	if want := "answered by engine " + responderID + "\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	if reqs := resp.received(); len(reqs) != 1 || reqs[0] != `{"key":"greeting"}` {
		t.Errorf("the responder received %q, want the JSON argument as given", reqs)
	}

	// No JSON argument sends {}, which this responder refuses with an error reply.
	r = runCLI(t, nil, "call", "keyvalue", "get", "--nats", srv.URL())
	wantCode(t, r, exitRuntime)
	wantContains(t, "stderr", r.stderr, "INVALID_ARGUMENT: key must not be empty", "answered by engine "+responderID)
	if r.stdout != "" {
		t.Errorf("an error reply printed on stdout: %q", r.stdout)
	}
	if reqs := resp.received(); len(reqs) != 2 || reqs[1] != "{}" {
		t.Errorf("the responder received %q, want {} last", reqs)
	}
}

func TestCallFindsTheBroker(t *testing.T) {
	srv := natstest.Start(t)
	startResponder(t, srv.URL())

	t.Run("ABI_NATS_URL", func(t *testing.T) {
		t.Chdir(t.TempDir())
		r := runCLI(t, map[string]string{"ABI_NATS_URL": srv.URL()}, "call", "keyvalue", "get", `{"key":"x"}`)
		wantCode(t, r, exitOK)
		wantContains(t, "stdout", r.stdout, `"found":false`)
	})
	t.Run("nats.url of abi-engine.yaml", func(t *testing.T) {
		t.Chdir(t.TempDir())
		writeFile(t, ".", "abi-engine.yaml", "nats: {url: \""+srv.URL()+"\"}\n")
		r := runCLI(t, nil, "call", "keyvalue", "get", `{"key":"greeting"}`)
		wantCode(t, r, exitOK)
	})
	t.Run("the embedded broker's address", func(t *testing.T) {
		t.Chdir(t.TempDir())
		writeFile(t, ".", "abi-engine.yaml", "nats: {embedded: {listen: \"0.0.0.0:"+strconv.Itoa(srv.Port())+"\"}}\n")
		r := runCLI(t, nil, "call", "keyvalue", "get", `{"key":"greeting"}`)
		wantCode(t, r, exitOK)
	})
	t.Run("flag wins over environment", func(t *testing.T) {
		t.Chdir(t.TempDir())
		r := runCLI(t, map[string]string{"ABI_NATS_URL": "nats://127.0.0.1:1"}, "call", "keyvalue", "get", `{"key":"greeting"}`, "--nats", srv.URL())
		wantCode(t, r, exitOK)
	})
}

func TestCallFailures(t *testing.T) {
	srv := natstest.Start(t)
	t.Chdir(t.TempDir())

	// Nobody serves keyvalue: the call is resent within its deadline, then fails.
	r := runCLI(t, nil, "call", "keyvalue", "get", `{"key":"k"}`, "--nats", srv.URL(), "--timeout", "1s")
	wantCode(t, r, exitRuntime)
	wantContains(t, "stderr", r.stderr, "abi.svc.keyvalue.v1.get", "no responders")

	// No broker at all.
	srv.Stop()
	r = runCLI(t, nil, "call", "keyvalue", "get", "--nats", srv.URL())
	wantCode(t, r, exitRuntime)
	wantContains(t, "stderr", r.stderr, "connect to NATS at "+srv.URL())
}

func TestEmbeddedURL(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1:4222": "nats://127.0.0.1:4222",
		"0.0.0.0:5222":   "nats://127.0.0.1:5222",
		":4222":          "nats://127.0.0.1:4222",
		"[::]:4222":      "nats://127.0.0.1:4222",
		"[::1]:4222":     "nats://[::1]:4222",
		"nats.local:1":   "nats://nats.local:1",
	}
	for listen, want := range cases {
		if got, err := embeddedURL(listen); err != nil || got != want {
			t.Errorf("embeddedURL(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
	if _, err := embeddedURL("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "--nats") {
		t.Errorf("a random embedded port: err %v, want one asking for --nats", err)
	}
}
