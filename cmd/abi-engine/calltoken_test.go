package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/protocol"
)

// TestCallSignsAServiceToken: with --jwt-secret-file, call sends a token the engine's
// verifier accepts for --caller; an unreadable secret file is a usage error naming the
// flag, and nothing is sent.
func TestCallSignsAServiceToken(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	tokens := make(chan string, 4)
	if _, err := nc.QueueSubscribe(protocol.ServiceSubject(protocol.KeyValue, "get"), "q", func(m *nats.Msg) {
		tokens <- m.Header.Get(protocol.HeaderAuthToken)
		_ = m.Respond([]byte(`{"found":false,"value":null}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	secret := []byte("call test secret, long enough!!!")
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "call", "keyvalue", "get", `{"key":"k"}`, "--nats", srv.URL(), "--jwt-secret-file", file, "--caller", "ops")
	wantCode(t, r, exitOK)
	v, err := servicetoken.NewVerifier(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	if caller, err := v.Verify(<-tokens); err != nil || caller != "ops" {
		t.Errorf("the token verifies as %q, %v; want caller ops", caller, err)
	}

	r = runCLI(t, nil, "call", "keyvalue", "get", `{"key":"k"}`, "--nats", srv.URL(), "--jwt-secret-file", file+".missing")
	wantCode(t, r, exitUsage)
	wantContains(t, "stderr", r.stderr, "--jwt-secret-file")
	if len(tokens) != 0 {
		t.Error("a call with an unreadable secret file was sent")
	}
}
