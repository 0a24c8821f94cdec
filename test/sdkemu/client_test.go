package sdkemu_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/test/sdkemu"
)

// The client is only a proof if it refuses what the SDK refuses. These tests put a
// hand-written responder on a real broker in place of an engine and make it break
// each rule once.

const owner = "0123456789abcdef0123456789abcdef"

// respond answers every request on subject with what reply returns.
func respond(t *testing.T, nc *nats.Conn, subject string, reply func(*nats.Msg) *nats.Msg) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		r := reply(m)
		r.Subject = m.Reply
		_ = nc.PublishMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClientRefusesWhatTheSDKRefuses(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	tr := sdkemu.New(natstest.Connect(t, srv.URL()), sdkemu.Static("token"), 5*time.Second)
	ctx := ctxFor(t)

	t.Run("micro error headers win over the body", func(t *testing.T) {
		respond(t, nc, "t.micro", func(*nats.Msg) *nats.Msg {
			h := nats.Header{sdkemu.HeaderServiceCode: {"500"}}
			return &nats.Msg{Header: h, Data: marshal(t, &kvv1.GetResponse{Result: &kvv1.GetResponse_Value{Value: []byte("v")}})}
		})
		_, err := tr.Call(ctx, "t.micro", &kvv1.GetRequest{Key: "k"}, &kvv1.GetResponse{})
		wantCode(t, "a reply with Nats-Service-Error-Code", err, "500")
	})

	t.Run("a token with a newline is not sent", func(t *testing.T) {
		bad := sdkemu.New(nc, sdkemu.Static("a\nb"), time.Second)
		if _, err := bad.Call(ctx, "t.micro", &kvv1.GetRequest{}, &kvv1.GetResponse{}); !errors.Is(err, sdkemu.ErrBadToken) {
			t.Errorf("got %v, want ErrBadToken", err)
		}
	})

	t.Run("an owner that is not 32 lowercase hex", func(t *testing.T) {
		if _, err := sdkemu.TransferSubject("p", "read", strings.ToUpper(owner)+":x"); !errors.Is(err, sdkemu.ErrProtocol) {
			t.Errorf("got %v, want ErrProtocol", err)
		}
		if s, err := sdkemu.TransferSubject("p", "read", owner+":x"); err != nil || s != "p."+owner+".read" {
			t.Errorf("got %q %v", s, err)
		}
	})

	// A parked reply whose reads break a rule: a wrong sequence, data in the done reply
	// (dropped, so the size no longer matches), fewer bytes than announced. Each time
	// the session is closed all the same.
	for _, c := range []struct {
		name  string
		reads func(seq uint64) *transferv1.ReadResponse
		want  string
	}{
		{"a reply for another sequence", func(seq uint64) *transferv1.ReadResponse {
			return &transferv1.ReadResponse{Data: []byte("0123456789"), Sequence: seq + 1}
		}, "Transfer sequence mismatch"},
		{"data in the done reply is dropped", func(seq uint64) *transferv1.ReadResponse {
			return &transferv1.ReadResponse{Data: []byte("0123456789"), Sequence: seq, Done: true}
		}, "overflow reply has 0 bytes, announced 10"},
		{"fewer bytes than announced", func(seq uint64) *transferv1.ReadResponse {
			if seq == 0 {
				return &transferv1.ReadResponse{Data: []byte("01234"), Sequence: seq}
			}
			return &transferv1.ReadResponse{Sequence: seq, Done: true}
		}, "overflow reply has 5 bytes, announced 10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			subject := "t.parked." + strings.ReplaceAll(c.name, " ", "_")
			respond(t, nc, subject, func(*nats.Msg) *nats.Msg {
				return &nats.Msg{Header: nats.Header{sdkemu.HeaderOverflowReply: {owner + ":1"}, sdkemu.HeaderOverflowSize: {"10"}}}
			})
			respond(t, nc, sdkemu.OverflowPrefix+"."+owner+".read", func(m *nats.Msg) *nats.Msg {
				var req transferv1.ReadRequest
				if err := proto.Unmarshal(m.Data, &req); err != nil {
					t.Error(err)
				}
				if m.Header.Get(sdkemu.HeaderOverflow) != "" {
					t.Error("a chunk exchange of the overflow host carries Abi-Overflow")
				}
				return &nats.Msg{Data: marshal(t, c.reads(req.GetSequence()))}
			})
			closed := make(chan struct{}, 1)
			respond(t, nc, sdkemu.OverflowPrefix+"."+owner+".close", func(*nats.Msg) *nats.Msg {
				closed <- struct{}{}
				return &nats.Msg{}
			})
			_, err := tr.Call(ctx, subject, &kvv1.GetRequest{Key: "k"}, &kvv1.GetResponse{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
			testwait.Recv(t, closed, 5*time.Second, "the parked reply's close")
		})
	}
}
