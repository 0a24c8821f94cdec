package client

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/protocol"
)

// TestServiceToken: with WithServiceToken every request carries a token the engine's
// verifier accepts for the caller, the same one until it nears its expiry; without it,
// none.
func TestServiceToken(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	secret := []byte("client test secret, 32 bytes long")
	v, err := servicetoken.NewVerifier(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 8)
	sub, err := nc.Subscribe("abi.svc.keyvalue.v1.get", func(m *nats.Msg) {
		seen <- m.Header.Get(protocol.HeaderAuthToken)
		_ = m.Respond([]byte(`{"found":false}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tr, err := NewTransport(nc, WithServiceToken(secret, "go-sdk"))
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i := range 2 {
		if _, err := tr.Call(ctx, protocol.KeyValue, protocol.OpGet, []byte(`{"key":"k"}`)); err != nil {
			t.Fatal(err)
		}
		tok := <-seen
		if caller, err := v.Verify(tok); err != nil || caller != "go-sdk" {
			t.Fatalf("call %d: token %q verifies as %q, %v", i, tok, caller, err)
		}
		if i == 0 {
			first = tok
		} else if tok != first {
			t.Errorf("a second call minted a new token; it should reuse the first until it nears expiry")
		}
	}

	plain, err := NewTransport(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Call(ctx, protocol.KeyValue, protocol.OpGet, []byte(`{"key":"k"}`)); err != nil {
		t.Fatal(err)
	}
	if tok := <-seen; tok != "" {
		t.Errorf("a transport without WithServiceToken sent %q", tok)
	}

	if _, err := NewTransport(nc, WithServiceToken(nil, "go-sdk")); err == nil {
		t.Error("an empty secret was accepted")
	}
	if _, err := NewTransport(nc, WithServiceToken(secret, "")); err == nil {
		t.Error("an empty caller was accepted")
	}
}

func TestTokenReissuedBeforeExpiry(t *testing.T) {
	s := &tokenSource{secret: []byte("s"), caller: "c"}
	t0 := time.Unix(1_800_000_000, 0)
	a, err := s.at(t0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := s.at(t0.Add(servicetoken.DefaultTTL - tokenRenewBefore - time.Second)); b != a {
		t.Error("reissued too early")
	}
	if c, _ := s.at(t0.Add(servicetoken.DefaultTTL - tokenRenewBefore)); c == a {
		t.Error("not reissued within tokenRenewBefore of its expiry")
	}
}
