package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/internal/testwait"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	osv1 "github.com/abi-engine/engine/proto/abi/object_storage/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// pbRequest sends a protobuf request with the Python clients' headers and decodes the
// reply into rep, returning the error it carries.
func pbRequest(t *testing.T, nc *nats.Conn, subject string, header nats.Header, req proto.Message, rep interface {
	proto.Message
	GetError() *commonv1.CallError
}) *commonv1.CallError {
	t.Helper()
	var body []byte
	if req != nil {
		var err error
		if body, err = proto.Marshal(req); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Header: header, Data: body})
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if err := proto.Unmarshal(m.Data, rep); err != nil {
		t.Fatalf("%s: reply %x: %v", subject, m.Data, err)
	}
	return rep.GetError()
}

// putSubscribers counts the subscriptions at the broker that an object put reaches.
func putSubscribers(t *testing.T, srv *natstest.Server) int {
	t.Helper()
	sz, err := srv.Raw().Subsz(&server.SubszOptions{Subscriptions: true, Test: protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpPutObject)})
	if err != nil {
		t.Fatal(err)
	}
	return len(sz.Subs)
}

// An overflow upload made on the serving engine is used by a call that the next engine
// serves, across a handover: the new engine fetches the upload from the old one, still
// draining, over its owner-scoped subjects, and the object is stored. The old
// engine's drain waits for the upload, which the fetch closes.
func TestOverflowRequestAcrossAHandover(t *testing.T) {
	// 256 KiB: the JetStream object store writes chunks of 128 KiB, which must fit.
	srv := natstest.Start(t, natstest.WithMaxPayload(256<<10))
	secret := []byte("overflow-handover-secret-0123456789")
	secretFile := filepath.Join(t.TempDir(), "jwt-secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := func(rollout string) *engine.Engine {
		c := cfg(t, srv.URL(), "serve", rollout, "jetstream")
		c.NATS.JWTSecretFile = secretFile
		c.NATS.Engine.DrainSeconds = 60 // the drain waits for the upload
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		return newEngine(t, c)
	}
	a := conf("v1")
	load(t, a)
	b := conf("v2")
	load(t, b)
	if b.State() != engine.StateStandby {
		t.Fatalf("b is %s", b.State())
	}
	tok, err := servicetoken.Mint(secret, "sdk-ci", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, srv.URL())
	hdr := func() nats.Header { return nats.Header{protocol.HeaderAuthToken: {tok}} }

	value := bytes.Repeat([]byte("0123456789abcdef"), 600<<10/16) // 600 KiB
	data, err := proto.Marshal(&osv1.PutObjectRequest{Prefix: "overflow", Key: "big", Content: value})
	if err != nil {
		t.Fatal(err)
	}
	var open transferv1.OpenResponse
	if e := pbRequest(t, nc, protocol.TransferOpenSubject(protocol.OverflowPrefix), hdr(),
		&transferv1.OpenRequest{Operation: protocol.OverflowRequestOperation}, &open); e != nil {
		t.Fatalf("open: %v", e)
	}
	owner, _, err := sessions.ParseSessionID(open.GetId())
	if err != nil || owner != a.InstanceID() {
		t.Fatalf("upload %s is not a's (%s): %v", open.GetId(), a.InstanceID(), err)
	}
	chunk := int(open.GetChunkBytes())
	for seq := 0; seq*chunk < len(data); seq++ {
		if e := pbRequest(t, nc, sessions.OwnerSubject(protocol.OverflowPrefix, owner, protocol.TransferWrite), hdr(),
			&transferv1.WriteRequest{Id: open.GetId(), Sequence: uint64(seq), Data: data[seq*chunk : min((seq+1)*chunk, len(data))]},
			&transferv1.WriteResponse{}); e != nil {
			t.Fatalf("write %d: %v", seq, e)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- a.Shutdown(ctx) }()
	testwait.For(t, 30*time.Second, "b serving", func() bool { return b.State() == engine.StateServing })
	testwait.For(t, 30*time.Second, "a to stop taking object calls", func() bool { return putSubscribers(t, srv) == 1 })

	call := hdr()
	call.Set(protocol.HeaderOverflow, "1")
	call.Set(protocol.HeaderOverflowRequest, open.GetId())
	var put osv1.PutObjectResponse
	if e := pbRequest(t, nc, protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpPutObject), call, nil, &put); e != nil {
		t.Fatalf("the put served by b from a's upload: %v", e)
	}
	// Read back: 600 KiB does not fit a reply either, so b parks it; read it as the
	// Python SDK does (reads without a start until done, then close).
	get := hdr()
	get.Set(protocol.HeaderOverflow, "1")
	body, err := proto.Marshal(&osv1.GetObjectRequest{Prefix: "overflow", Key: "big"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.RequestMsg(&nats.Msg{Subject: protocol.ServiceSubject(protocol.ObjectStorage, protocol.OpGetObject), Header: get, Data: body}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	parked := m.Header.Get(protocol.HeaderOverflowReply)
	if parked == "" || len(m.Data) != 0 {
		t.Fatalf("get: %d bytes, headers %v; want a parked reply", len(m.Data), m.Header)
	}
	powner, _, _ := sessions.ParseSessionID(parked)
	if powner != b.InstanceID() {
		t.Fatalf("the get was served by %s, want b (%s)", powner, b.InstanceID())
	}
	var got []byte
	for seq := uint64(0); ; seq++ {
		var r transferv1.ReadResponse
		if e := pbRequest(t, nc, sessions.OwnerSubject(protocol.OverflowPrefix, powner, protocol.TransferRead), hdr(),
			&transferv1.ReadRequest{Id: parked, Sequence: seq}, &r); e != nil {
			t.Fatalf("read %d: %v", seq, e)
		}
		if r.GetDone() {
			break
		}
		got = append(got, r.GetData()...)
	}
	_ = pbRequest(t, nc, sessions.OwnerSubject(protocol.OverflowPrefix, powner, protocol.TransferClose), hdr(),
		&transferv1.CloseRequest{Id: parked}, &transferv1.CloseResponse{})
	var rep osv1.GetObjectResponse
	if err := proto.Unmarshal(got, &rep); err != nil || !bytes.Equal(rep.GetContent(), value) {
		t.Fatalf("the object read back: %d bytes, %v", len(rep.GetContent()), err)
	}
	if err := testwait.Recv(t, shut, 30*time.Second, "a's handover"); err != nil {
		t.Fatalf("a's handover: %v", err)
	}
}
