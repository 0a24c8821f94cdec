package keyvalue_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/memory"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/protocol"
)

var testSecret = []byte("a test secret of 32 bytes or so!")

func withTokens(t testing.TB) func(*primaries.Config) {
	v, err := servicetoken.NewVerifier(testSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *primaries.Config) { c.Tokens = v }
}

func mint(t testing.TB, secret []byte, sub string, at time.Time) string {
	t.Helper()
	tok, err := servicetoken.Mint(secret, sub, at, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// pbCall sends a protobuf request as the Python clients do (token, Abi-Overflow: 1)
// and returns the reply, after checking that it never carries micro's error headers.
func pbCall(t *testing.T, nc *nats.Conn, op, token string, req proto.Message) *nats.Msg {
	t.Helper()
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return rawCall(t, nc, op, token, body)
}

func rawCall(t *testing.T, nc *nats.Conn, op, token string, body []byte) *nats.Msg {
	t.Helper()
	m := nats.NewMsg(protocol.ServiceSubject(protocol.KeyValue, op))
	m.Data = body
	if token != "" {
		m.Header.Set(protocol.HeaderAuthToken, token)
	}
	m.Header.Set("Abi-Overflow", "1")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rep, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if rep.Header.Get(micro.ErrorHeader) != "" || rep.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("%s: a protobuf reply carries micro's error headers: %v", op, rep.Header)
	}
	return rep
}

// wantBytes checks a reply body against hex, and its Abi-Error-Code header.
func wantBytes(t *testing.T, what string, rep *nats.Msg, wantHex, wantCode string) {
	t.Helper()
	want, err := hex.DecodeString(strings.ReplaceAll(wantHex, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rep.Data, want) {
		t.Errorf("%s: reply %x, want %x", what, rep.Data, want)
	}
	if got := rep.Header.Get(protocol.HeaderErrorCode); got != wantCode {
		t.Errorf("%s: Abi-Error-Code %q, want %q", what, got, wantCode)
	}
}

func ctxOf() *commonv1.CallContext {
	return &commonv1.CallContext{TraceId: "0b8e5f0e-4c1b-4e7a-9a52-0f6f6c1f4d2e", TimeoutMs: 10000}
}

// TestProtobufContract drives every keyvalue operation in protobuf, as a Python client
// does, and pins the reply bytes: the oneof set for false and empty, KV_NOT_FOUND in
// the body with Abi-Error-Code, never micro's error headers.
func TestProtobufContract(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "pooled", true: "inline"}[inline], func(t *testing.T) {
			svc := keyvalue.Service(memory.New())
			svc.Inline = inline
			nc := serveService(t, svc, withTokens(t))
			tok := mint(t, testSecret, "sdk-ci", time.Now())
			ttl := func(s int64) *int64 { return &s }

			wantBytes(t, "set", pbCall(t, nc, protocol.OpSet, tok, &kvv1.SetRequest{Context: ctxOf(), Key: "k", Value: []byte("v")}), "", "")
			wantBytes(t, "get", pbCall(t, nc, protocol.OpGet, tok, &kvv1.GetRequest{Context: ctxOf(), Key: "k"}), "0a 01 76", "")
			wantBytes(t, "exists", pbCall(t, nc, protocol.OpExists, tok, &kvv1.ExistsRequest{Context: ctxOf(), Key: "k"}), "08 01", "")
			wantBytes(t, "set_if_not_exists on a live key", pbCall(t, nc, protocol.OpSetIfNotExists, tok,
				&kvv1.SetIfNotExistsRequest{Context: ctxOf(), Key: "k", Value: []byte("x"), Ttl: ttl(5)}), "08 00", "")
			wantBytes(t, "delete_if_value_matches, wrong value", pbCall(t, nc, protocol.OpDeleteIfValueMatches, tok,
				&kvv1.DeleteIfValueMatchesRequest{Context: ctxOf(), Key: "k", Value: []byte("w")}), "08 00", "")
			wantBytes(t, "get after the refused writes", pbCall(t, nc, protocol.OpGet, tok, &kvv1.GetRequest{Key: "k"}), "0a 01 76", "")
			wantBytes(t, "delete_if_value_matches, right value", pbCall(t, nc, protocol.OpDeleteIfValueMatches, tok,
				&kvv1.DeleteIfValueMatchesRequest{Key: "k", Value: []byte("v")}), "08 01", "")
			wantBytes(t, "exists after delete", pbCall(t, nc, protocol.OpExists, tok, &kvv1.ExistsRequest{Key: "k"}), "08 00", "")
			wantBytes(t, "set an empty value", pbCall(t, nc, protocol.OpSet, tok, &kvv1.SetRequest{Key: "e"}), "", "")
			wantBytes(t, "get an empty value", pbCall(t, nc, protocol.OpGet, tok, &kvv1.GetRequest{Key: "e"}), "0a 00", "")
			// Fields in another order and fields this contract does not know (a newer
			// client's) are accepted, as proto3 does: key first, then field 99.
			wantBytes(t, "get with fields out of order and an unknown one",
				rawCall(t, nc, protocol.OpGet, tok, []byte{0x12, 0x01, 'e', 0x0a, 0x02, 0x10, 0x05, 0x9a, 0x06, 0x01, 'x'}), "0a 00", "")
			wantBytes(t, "set_if_not_exists on a new key", pbCall(t, nc, protocol.OpSetIfNotExists, tok,
				&kvv1.SetIfNotExistsRequest{Key: "n", Value: []byte("1"), Ttl: ttl(60)}), "08 01", "")

			// Misses: the Python engine's code and text, in the message's own error field.
			wantBytes(t, "get of a missing key", pbCall(t, nc, protocol.OpGet, tok, &kvv1.GetRequest{Context: ctxOf(), Key: "k"}),
				"12 20 0a 0c"+hex.EncodeToString([]byte("KV_NOT_FOUND"))+"12 10"+hex.EncodeToString([]byte("Key not found: k")), "KV_NOT_FOUND")
			wantBytes(t, "delete of a missing key", pbCall(t, nc, protocol.OpDelete, tok, &kvv1.DeleteRequest{Key: "k"}),
				"0a 20 0a 0c"+hex.EncodeToString([]byte("KV_NOT_FOUND"))+"12 10"+hex.EncodeToString([]byte("Key not found: k")), "KV_NOT_FOUND")
			wantBytes(t, "delete of a live key", pbCall(t, nc, protocol.OpDelete, tok, &kvv1.DeleteRequest{Key: "e"}), "", "")

			// Bad input: a clear code, nothing stored.
			for _, bad := range []int64{0, -1} {
				rep := pbCall(t, nc, protocol.OpSet, tok, &kvv1.SetRequest{Key: "ttl", Value: []byte("v"), Ttl: ttl(bad)})
				wantError(t, rep, &kvv1.SetResponse{}, protocol.InvalidArgument, "ttl must be a whole number of seconds above 0")
			}
			rep := rawCall(t, nc, protocol.OpSet, tok, []byte{0xff})
			wantError(t, rep, &kvv1.SetResponse{}, protocol.InvalidArgument, "invalid protobuf request")
			rep = pbCall(t, nc, protocol.OpSet, tok, &kvv1.SetRequest{Key: "", Value: []byte("v")})
			wantError(t, rep, &kvv1.SetResponse{}, protocol.InvalidArgument, "key must not be empty")
			wantBytes(t, "nothing stored by the refused writes", pbCall(t, nc, protocol.OpExists, tok, &kvv1.ExistsRequest{Key: "ttl"}), "08 00", "")
			// An empty body is an all-defaults request: here, the empty key.
			rep = rawCall(t, nc, protocol.OpGet, tok, nil)
			wantError(t, rep, &kvv1.GetResponse{}, protocol.InvalidArgument, "key must not be empty")
		})
	}
}

// errorOf is the CallError of a decoded response message.
type errorOf interface {
	proto.Message
	GetError() *commonv1.CallError
}

func wantError(t *testing.T, rep *nats.Msg, into errorOf, code protocol.Code, text string) {
	t.Helper()
	if err := proto.Unmarshal(rep.Data, into); err != nil {
		t.Fatalf("reply %x: %v", rep.Data, err)
	}
	e := into.GetError()
	if e.GetCode() != string(code) || !strings.Contains(e.GetMessage(), text) || e.GetRetryable() {
		t.Errorf("error %v, want %s containing %q, not retryable", e, code, text)
	}
	if got := rep.Header.Get(protocol.HeaderErrorCode); got != string(code) {
		t.Errorf("Abi-Error-Code %q, want %s", got, code)
	}
}

// TestProtobufAuth: with a secret, a call of either codec without a valid token is
// refused UNAUTHENTICATED and runs nothing.
func TestProtobufAuth(t *testing.T) {
	nc := serveService(t, keyvalue.Service(memory.New()), withTokens(t))
	now := time.Now()
	good := mint(t, testSecret, "sdk-ci", now)
	refused := map[string]string{
		"no token":     "",
		"malformed":    "garbage",
		"wrong secret": mint(t, []byte("another secret, also long enough"), "sdk-ci", now),
		"expired":      mint(t, testSecret, "sdk-ci", now.Add(-2*time.Hour)),
	}
	for name, tok := range refused {
		rep := pbCall(t, nc, protocol.OpSet, tok, &kvv1.SetRequest{Context: ctxOf(), Key: "k", Value: []byte("v")})
		wantError(t, rep, &kvv1.SetResponse{}, protocol.Unauthenticated, "missing or invalid auth token")
		// JSON too, once the engine has a secret.
		m := nats.NewMsg(protocol.ServiceSubject(protocol.KeyValue, protocol.OpSet))
		m.Data = []byte(`{"key":"k","value":"dg=="}`)
		if tok != "" {
			m.Header.Set(protocol.HeaderAuthToken, tok)
		}
		jrep, err := nc.RequestMsg(m, callTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if code := jrep.Header.Get(protocol.HeaderErrorCode); code != string(protocol.Unauthenticated) || !bytes.Contains(jrep.Data, []byte(`"UNAUTHENTICATED"`)) {
			t.Errorf("%s: JSON set answered %s %s, want UNAUTHENTICATED", name, code, jrep.Data)
		}
	}
	wantBytes(t, "nothing was stored", pbCall(t, nc, protocol.OpExists, good, &kvv1.ExistsRequest{Key: "k"}), "08 00", "")
	m := nats.NewMsg(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet))
	m.Data = []byte(`{"key":"k"}`)
	m.Header.Set(protocol.HeaderAuthToken, good)
	jrep, err := nc.RequestMsg(m, callTimeout)
	if err != nil || string(jrep.Data) != `{"found":false,"value":null}` {
		t.Fatalf("JSON get with a valid token: %s, %v", jrep.Data, err)
	}
}

// TestProtobufWithoutSecret: an engine without a secret serves JSON as before and
// refuses protobuf calls UNAUTHENTICATED, naming the setting, and says so.
func TestProtobufWithoutSecret(t *testing.T) {
	var told atomic.Int64
	nc := serveService(t, keyvalue.Service(memory.New()), func(c *primaries.Config) { c.OnNoTokens = func() { told.Add(1) } })
	rep := pbCall(t, nc, protocol.OpSet, mint(t, testSecret, "sdk-ci", time.Now()), &kvv1.SetRequest{Key: "k", Value: []byte("v")})
	wantError(t, rep, &kvv1.SetResponse{}, protocol.Unauthenticated, "nats.jwt_secret_file")
	if told.Load() != 1 {
		t.Errorf("OnNoTokens told %d times, want 1", told.Load())
	}
	jrep, err := nc.Request(protocol.ServiceSubject(protocol.KeyValue, protocol.OpGet), []byte(`{"key":"k"}`), callTimeout)
	if err != nil || string(jrep.Data) != `{"found":false,"value":null}` {
		t.Fatalf("JSON get: %s, %v (the refused protobuf set must have stored nothing)", jrep.Data, err)
	}
}

// TestProtobufReplyTooLarge: a protobuf reply above the broker's max payload, on a
// primary that parks no replies, is answered PAYLOAD_TOO_LARGE inside the reply
// message, with no micro error headers, as the Python engine does without parking.
// (Parked protobuf replies: sessions.TestProtobufParkedReply.)
func TestProtobufReplyTooLarge(t *testing.T) {
	store := memory.New()
	nc := serveServiceOn(t, natstest.Start(t, natstest.WithMaxPayload(64<<10)), keyvalue.Service(store), withTokens(t))
	if err := store.Set(context.Background(), "big", bytes.Repeat([]byte{'x'}, 100<<10), 0); err != nil {
		t.Fatal(err)
	}
	rep := pbCall(t, nc, protocol.OpGet, mint(t, testSecret, "sdk-ci", time.Now()), &kvv1.GetRequest{Key: "big"})
	wantError(t, rep, &kvv1.GetResponse{}, protocol.PayloadTooLarge, "above the broker's max payload")
}
