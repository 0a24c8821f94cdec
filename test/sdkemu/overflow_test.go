package sdkemu_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	"github.com/abi-engine/engine/test/sdkemu"
)

// bigValue is three times the broker's max payload.
const bigValue = 3 * maxPayload

// overflowReply is case f: an object of 192 KiB on a broker of 64 KiB (stored by a
// transfer), got with get_object: the reply is parked, the notice an empty body with
// exactly the two overflow headers; read without a start, the sizes match, closed;
// another caller cannot read it; without Abi-Overflow: 1 it is PAYLOAD_TOO_LARGE; the
// engine holds no session afterwards.
func (f *fixture) overflowReply(t *testing.T) {
	ctx := ctxFor(t)
	value := pattern(bigValue)
	if _, err := f.sdk.PutObjectStream(ctx, "f", "big.bin", value); err != nil {
		t.Fatalf("put 192 KiB through a transfer: %v", err)
	}
	body, err := proto.Marshal(&osv1.GetObjectRequest{Prefix: "f", Key: "big.bin"})
	if err != nil {
		t.Fatal(err)
	}
	token := f.token(t, f.secret, "sdk-ci", time.Now())
	msg, err := f.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: objects("get_object"), Data: body,
		Header: nats.Header{sdkemu.HeaderToken: {token}, sdkemu.HeaderOverflow: {"1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := proto.Marshal(&osv1.GetObjectResponse{Result: &osv1.GetObjectResponse_Content{Content: value}})
	if err != nil {
		t.Fatal(err)
	}
	id := msg.Header.Get(sdkemu.HeaderOverflowReply)
	if len(msg.Data) != 0 || !sessionID.MatchString(id) || msg.Header.Get(sdkemu.HeaderOverflowSize) != strconv.Itoa(len(want)) {
		t.Fatalf("the notice: body %d bytes, headers %v; want an empty body, %s <32 hex>:… and %s %d",
			len(msg.Data), msg.Header, sdkemu.HeaderOverflowReply, sdkemu.HeaderOverflowSize, len(want))
	}
	noErrorHeaders(t, "the notice", msg.Header)
	if v := msg.Header.Get(sdkemu.HeaderErrorCode); v != "" {
		t.Errorf("the notice carries %s: %q", sdkemu.HeaderErrorCode, v)
	}
	_, err = f.other.Session(sdkemu.OverflowPrefix, id).Read(ctx, 0)
	wantCode(t, "another caller's read of the parked reply", err, "PERMISSION_DENIED")
	parked := f.sdk.Session(sdkemu.OverflowPrefix, id)
	got, _, err := parked.ReadAll(ctx, int64(len(want)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read without start: %d bytes (announced %d), %v", len(got), len(want), err)
	}
	if err := parked.Close(ctx); err != nil {
		t.Errorf("close the parked reply: %v", err)
	}
	if err := parked.Close(ctx); err != nil {
		t.Errorf("close the parked reply again: %v", err)
	}

	var rep osv1.GetObjectResponse
	r := call(t, f.sdk, objects("get_object"), &osv1.GetObjectRequest{Prefix: "f", Key: "big.bin"}, &rep)
	if r.Parked == "" || !bytes.Equal(rep.GetContent(), value) {
		t.Errorf("get_object through the transport: parked %q, %d bytes", r.Parked, len(rep.GetContent()))
	}

	msg, err = f.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: objects("get_object"), Data: body,
		Header: nats.Header{sdkemu.HeaderToken: {token}}})
	if err != nil {
		t.Fatal(err)
	}
	var tooLarge osv1.GetObjectResponse
	if err := proto.Unmarshal(msg.Data, &tooLarge); err != nil {
		t.Fatal(err)
	}
	if tooLarge.GetError().GetCode() != "PAYLOAD_TOO_LARGE" || msg.Header.Get(sdkemu.HeaderErrorCode) != "PAYLOAD_TOO_LARGE" {
		t.Errorf("without %s: %v, headers %v; want PAYLOAD_TOO_LARGE", sdkemu.HeaderOverflow, &tooLarge, msg.Header)
	}
	f.noSessions(t)
}

// overflowRequest is case g: a kv set of 192 KiB on a broker of 64 KiB goes through an
// upload (open "request", writes, a call with an empty body and Abi-Overflow-Request)
// and is read back through a parked reply; an upload made on one connection is used by
// a call on another; another caller's upload is PERMISSION_DENIED with nothing stored;
// the engine holds no session afterwards.
func (f *fixture) overflowRequest(t *testing.T) {
	ctx := ctxFor(t)
	value := pattern(bigValue)
	r := call(t, f.sdk, kv("set"), &kvv1.SetRequest{Key: "g/big", Value: value}, &kvv1.SetResponse{})
	if r.Uploaded == "" || !sessionID.MatchString(r.Uploaded) {
		t.Errorf("a set of %d bytes was not uploaded (upload %q)", len(value), r.Uploaded)
	}
	var got kvv1.GetResponse
	r = call(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "g/big"}, &got)
	if r.Parked == "" || !bytes.Equal(got.GetValue(), value) {
		t.Errorf("get of the uploaded value: parked %q, %d bytes", r.Parked, len(got.GetValue()))
	}

	// The upload on this connection, the call on another: the engine finds the upload
	// by its id, not by the connection it came on.
	second := sdkemu.New(natstest.Connect(t, f.srv.URL()), sdkemu.Static(f.token(t, f.secret, "sdk-ci", time.Now())), 10*time.Second)
	value2 := pattern(bigValue + 1)
	id, err := f.sdk.Upload(ctx, &kvv1.SetRequest{Key: "g/big2", Value: value2})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if _, err := second.CallUploaded(ctx, kv("set"), id, &kvv1.SetResponse{}); err != nil {
		t.Fatalf("set named by an upload of another connection: %v", err)
	}
	_ = f.sdk.Session(sdkemu.OverflowPrefix, id).Close(ctx)
	call(t, f.sdk, kv("get"), &kvv1.GetRequest{Key: "g/big2"}, &got)
	if !bytes.Equal(got.GetValue(), value2) {
		t.Errorf("get of the value uploaded on one connection and set on another: %d bytes", len(got.GetValue()))
	}

	id, err = f.sdk.Upload(ctx, &kvv1.SetRequest{Key: "g/stolen", Value: value})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	_, err = f.other.CallUploaded(ctx, kv("set"), id, &kvv1.SetResponse{})
	wantCode(t, "a set naming another caller's upload", err, "PERMISSION_DENIED")
	_ = f.sdk.Session(sdkemu.OverflowPrefix, id).Close(ctx)
	var ex kvv1.ExistsResponse
	call(t, f.sdk, kv("exists"), &kvv1.ExistsRequest{Key: "g/stolen"}, &ex)
	if ex.GetOkValue() {
		t.Error("a refused set stored its key")
	}
	f.noSessions(t)
}
