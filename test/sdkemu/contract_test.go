package sdkemu_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/test/sdkemu"
)

// TestPythonTransportContract runs the nine cases that prove a client following the
// Python SDK's transport rules works against abi-engine: a real engine process on a
// real broker whose max payload is 64 KiB, so that a 192 KiB value must travel
// through the overflow host both ways.
func TestPythonTransportContract(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and starts an abi-engine process")
	}
	f := newFixture(t)
	t.Run("a_kv_round_trip", f.kvRoundTrip)
	t.Run("b_kv_misses", f.kvMisses)
	t.Run("c_auth", f.auth)
	t.Run("d_object_unary", f.objectUnary)
	t.Run("e_object_transfers", f.objectTransfers)
	t.Run("f_overflow_reply", f.overflowReply)
	t.Run("g_overflow_request", f.overflowRequest)
	t.Run("h_codec_coexistence", f.codecCoexistence)
	t.Run("i_srv_info", f.srvInfo)
}

// maxPayload is the broker's limit: 192 KiB values are three times it.
const maxPayload = 64 << 10

// fixture is the broker, the engine and the clients every case shares.
type fixture struct {
	srv    *natstest.Server
	engine *sdkemu.Engine
	secret []byte
	nc     *nats.Conn
	// sdk is the caller "sdk-ci", other the caller "other": two identities with valid
	// tokens, on their own connections.
	sdk, other *sdkemu.Transport
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{secret: []byte("sdkemu-contract-secret-0123456789abcdef")}
	f.srv = natstest.Start(t, natstest.WithMaxPayload(maxPayload))
	f.engine = sdkemu.StartEngine(t, sdkemu.BuildEngine(t), f.srv.URL(), f.secret, sdkemu.EngineConfig{})
	f.nc = natstest.Connect(t, f.srv.URL())
	f.sdk = sdkemu.New(f.nc, sdkemu.Static(f.token(t, f.secret, "sdk-ci", time.Now())), 10*time.Second)
	f.other = sdkemu.New(natstest.Connect(t, f.srv.URL()), sdkemu.Static(f.token(t, f.secret, "other", time.Now())), 10*time.Second)
	return f
}

func (f *fixture) token(t *testing.T, secret []byte, sub string, iat time.Time) string {
	t.Helper()
	tok, err := sdkemu.Mint(secret, sub, iat, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call is a call that must succeed.
func call(t *testing.T, tr *sdkemu.Transport, subject string, req, resp proto.Message) *sdkemu.Reply {
	t.Helper()
	rep, err := tr.Call(ctxFor(t), subject, req, resp)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	noErrorHeaders(t, subject, rep.Header)
	if rep.Header.Get(sdkemu.HeaderErrorCode) != "" {
		t.Fatalf("%s: a success carries %s: %q", subject, sdkemu.HeaderErrorCode, rep.Header.Get(sdkemu.HeaderErrorCode))
	}
	return rep
}

// refused is a call that must be answered with code in its reply message, with
// Abi-Error-Code and without micro's error headers, and retryable as said.
func refused(t *testing.T, tr *sdkemu.Transport, subject string, req, resp proto.Message, code string, retryable bool) *sdkemu.RPCError {
	t.Helper()
	rep, err := tr.Call(ctxFor(t), subject, req, resp)
	e := wantCode(t, subject, err, code)
	if rep == nil {
		t.Fatalf("%s: no reply", subject)
	}
	noErrorHeaders(t, subject, rep.Header)
	if got := rep.Header.Get(sdkemu.HeaderErrorCode); got != code {
		t.Errorf("%s: %s = %q, want %q", subject, sdkemu.HeaderErrorCode, got, code)
	}
	if ce := sdkemu.CallErrorOf(resp); ce.GetRetryable() != retryable {
		t.Errorf("%s: retryable = %v, want %v", subject, ce.GetRetryable(), retryable)
	}
	return e
}

func wantCode(t *testing.T, what string, err error, code string) *sdkemu.RPCError {
	t.Helper()
	e, ok := err.(*sdkemu.RPCError)
	if !ok || e.Code != code {
		t.Fatalf("%s: got %v, want code %s", what, err, code)
	}
	return e
}

// noErrorHeaders fails on micro's error headers, which a Python client turns into
// code "500" whatever the body says.
func noErrorHeaders(t *testing.T, what string, h nats.Header) {
	t.Helper()
	for _, k := range []string{sdkemu.HeaderServiceError, sdkemu.HeaderServiceCode} {
		if v := h.Get(k); v != "" {
			t.Errorf("%s: reply carries %s: %q", what, k, v)
		}
	}
}

func wantBytes(t *testing.T, what string, got []byte, wantHex string) {
	t.Helper()
	want, err := hex.DecodeString(wantHex)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: body %x, want %s", what, got, wantHex)
	}
}

// noSessions waits until the engine holds no transfer or overflow session.
func (f *fixture) noSessions(t *testing.T) {
	t.Helper()
	testwait.For(t, 20*time.Second, "the engine to hold no session", func() bool {
		n, err := f.engine.Gauge("abi_engine_open_sessions")
		return err == nil && n == 0
	})
}

func kv(op string) string { return "abi.svc.keyvalue.v1." + op }
func objects(op string) string {
	return "abi.svc.object_storage.v1." + op
}
