package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// session is one object-storage transfer driven step by step, the way the SDK does it.
type session struct {
	t     *testing.T
	tr    *client.Transport
	id    string
	owner string // the instance that answered the open
	seq   uint64
}

var objPrefix = protocol.TransferPrefix(protocol.ObjectStorage)

func openPut(t *testing.T, tr *client.Transport, key string) *session {
	t.Helper()
	meta, _ := json.Marshal(protocol.ObjectTransfer{Prefix: "e2e", Key: key})
	body, _ := json.Marshal(protocol.TransferOpenRequest{Operation: protocol.OpTransferPut, Metadata: meta, ChunkBytes: 1024})
	r, err := tr.Request(ctxFor(t, 10*time.Second), protocol.TransferOpenSubject(objPrefix), body, nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	var rep protocol.TransferOpenReply
	if err := json.Unmarshal(r.Data, &rep); err != nil {
		t.Fatal(err)
	}
	return &session{t: t, tr: tr, id: rep.ID, owner: r.Instance}
}

func (s *session) step(op string, req any, reply any) error {
	subject, err := protocol.TransferSessionSubject(objPrefix, s.id, op)
	if err != nil {
		s.t.Fatal(err)
	}
	body, _ := json.Marshal(req)
	r, err := s.tr.Request(ctxFor(s.t, 10*time.Second), subject, body, nil)
	if err != nil {
		return err
	}
	if r.Instance != s.owner {
		s.t.Fatalf("%s answered by %s, the session's owner is %s", op, r.Instance, s.owner)
	}
	if reply != nil {
		return json.Unmarshal(r.Data, reply)
	}
	return nil
}

func (s *session) write(data []byte) error {
	err := s.step(protocol.TransferWrite, protocol.TransferWriteRequest{ID: s.id, Sequence: s.seq, Data: data}, nil)
	s.seq++
	return err
}

func (s *session) start() error {
	return s.step(protocol.TransferStart, protocol.TransferStartRequest{ID: s.id}, nil)
}

// TestTransferAcrossAHandover is done-when 6: a transfer in progress at SIGTERM
// completes on the old engine while new ones open on the new engine; a stuck one is
// closed at the drain deadline, and the old engine exits.
func TestTransferAcrossAHandover(t *testing.T) {
	srv := natstest.Start(t)
	const drain = 3.0
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), Rollout: "v1", Drain: drain, HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	b := start(t, "B", engineConfig{NATSURL: srv.URL(), Rollout: "v2", Drain: drain, HTTPPort: testproc.FreePort(t)})
	b.waitState("standby", 20*time.Second)
	idA, idB := a.instanceID(), b.instanceID()
	aOpens := openResponders(t, srv) // a standby accepts none
	if len(aOpens) != 1 {
		t.Fatalf("connections accepting opens with A serving and B standing by: %v, want A's alone", aOpens)
	}
	tr, err := client.NewTransport(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}

	first := bytes.Repeat([]byte("a"), 1024)
	second := bytes.Repeat([]byte("b"), 500)
	inflight := openPut(t, tr, "inflight")
	stuck := openPut(t, tr, "stuck")
	if inflight.owner != idA || stuck.owner != idA {
		t.Fatalf("opens answered by %s and %s, want A %s", inflight.owner, stuck.owner, idA)
	}
	if err := inflight.write(first); err != nil {
		t.Fatal(err)
	}
	if err := stuck.write(first); err != nil {
		t.Fatal(err)
	}

	a.signal(syscall.SIGTERM)
	sigterm := time.Now()
	b.waitState("serving", 10*time.Second)
	// A serves on until it sees B's responders at the broker (the successor phase), so
	// an open may still reach it until its drain ends its subscriptions; the sessions it
	// holds it serves on.
	waitOpensMoved(t, srv, aOpens[0], 10*time.Second)

	// New transfers open on B.
	fresh := openPut(t, tr, "fresh")
	if fresh.owner != idB {
		t.Fatalf("a transfer opened after the handover was answered by %s, want B %s", fresh.owner, idB)
	}
	if err := fresh.write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := fresh.start(); err != nil {
		t.Fatal(err)
	}
	// The one in progress completes on A.
	if err := inflight.write(second); err != nil {
		t.Fatalf("the transfer in progress failed on its engine: %v", err)
	}
	if err := inflight.start(); err != nil {
		t.Fatalf("the transfer in progress could not complete: %v", err)
	}
	objects := client.NewObjectStorage(tr)
	got, err := objects.GetObject(ctxFor(t, 10*time.Second), "e2e", "inflight")
	if err != nil || !bytes.Equal(got, append(append([]byte{}, first...), second...)) {
		t.Fatalf("object written across the handover: %d bytes, %v", len(got), err)
	}

	// The stuck one holds A until the drain deadline, then is closed and A exits.
	if code := a.exitCode(time.Duration(drain*float64(time.Second)) + 20*time.Second); code != 0 {
		t.Fatalf("A exited %d", code)
	}
	if waited := time.Since(sigterm); waited < time.Duration(drain*float64(time.Second)*0.9) {
		t.Fatalf("A exited %s after SIGTERM with a transfer open, before the %gs drain deadline", waited, drain)
	}
	err = stuck.write(second)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("the stuck transfer after its engine exited: %v, want no responders", err)
	}
}

// openResponders are the connections the broker holds a subscription of on the object
// storage transfer's open subject (one per engine that accepts opens).
func openResponders(t *testing.T, srv *natstest.Server) []uint64 {
	t.Helper()
	sz, err := srv.Raw().Subsz(&server.SubszOptions{Subscriptions: true, Test: protocol.TransferOpenSubject(objPrefix)})
	if err != nil {
		t.Fatal(err)
	}
	var cids []uint64
	for _, sub := range sz.Subs {
		cids = append(cids, sub.Cid)
	}
	return cids
}

// waitOpensMoved waits until the only connection accepting opens is another than
// from's: the engine that accepted them has ended its subscription, its successor holds
// one.
func waitOpensMoved(t *testing.T, srv *natstest.Server, from uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		cids := openResponders(t, srv)
		if len(cids) == 1 && cids[0] != from {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections accepting opens after %s: %v, want one other than %d", within, cids, from)
		}
		time.Sleep(10 * time.Millisecond) // the broker's state, polled as waitLog polls a log
	}
}
