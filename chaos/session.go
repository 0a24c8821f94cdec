package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/protocol"
)

// killSession kills a transfer session's actor in the middle of an upload: it opens an
// object_storage "put" session on m, writes the first chunk, and makes the session's
// actor panic. The sessions package's rule: a crashed session actor loses its session
// (its bytes were the actor's), so the session's next call is NOT_FOUND, and nothing
// else notices. The check also redoes the upload as one transfer on the same host and
// reads the object back: the host itself must keep working.
func (h *harness) killSession(m *inproc) error {
	tr, err := client.NewTransport(h.nc, h.clientOptions()...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	prefix := protocol.TransferPrefix(protocol.ObjectStorage)
	obj := protocol.ObjectTransfer{Prefix: "chaos-session", Key: fmt.Sprintf("seed-%d", h.opts.Seed)}
	meta, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var open protocol.TransferOpenReply
	if err := call(ctx, tr, protocol.TransferOpenSubject(prefix), protocol.TransferOpenRequest{Operation: protocol.OpTransferPut, Metadata: meta}, &open); err != nil {
		return fmt.Errorf("open a put session: %w", err)
	}
	owner, _, err := protocol.ParseSessionID(open.ID)
	if err != nil {
		return err
	}
	if owner != m.eng.InstanceID() {
		return fmt.Errorf("session %s opened on %s, not on %s, the holder", open.ID, owner, m.eng.InstanceID())
	}
	subject := func(op string) string { return protocol.TransferOwnerSubject(prefix, owner, op) }
	first, second := bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100)
	if err := call(ctx, tr, subject(protocol.TransferWrite), protocol.TransferWriteRequest{ID: open.ID, Sequence: 0, Data: first}, nil); err != nil {
		return fmt.Errorf("write chunk 0 of session %s: %w", open.ID, err)
	}
	target := "session:" + open.ID
	h.fault(m.nm, "panic injected into %s", target)
	if err := m.eng.InjectPanic(target); err != nil {
		return fmt.Errorf("kill %s: %w", target, err)
	}
	err = call(ctx, tr, subject(protocol.TransferWrite), protocol.TransferWriteRequest{ID: open.ID, Sequence: 1, Data: second}, nil)
	if !errors.Is(err, protocol.ErrNotFound) {
		return fmt.Errorf("write chunk 1 of session %s after its actor was killed: %v, want NOT_FOUND (the session is lost with its actor)", open.ID, err)
	}
	// Closing a lost session succeeds, as closing any unknown one does.
	if err := call(ctx, tr, subject(protocol.TransferClose), protocol.TransferCloseRequest{ID: open.ID}, nil); err != nil {
		return fmt.Errorf("close lost session %s: %w", open.ID, err)
	}
	want := append(first, second...)
	if _, err := tr.Upload(ctx, prefix, protocol.OpTransferPut, obj, want); err != nil {
		return fmt.Errorf("redo the upload of %s/%s after a session was lost: %w", obj.Prefix, obj.Key, err)
	}
	got, err := client.NewObjectStorage(tr).GetObject(ctx, obj.Prefix, obj.Key)
	if err != nil {
		return fmt.Errorf("read back %s/%s: %w", obj.Prefix, obj.Key, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("object %s/%s holds %d bytes, want the %d uploaded", obj.Prefix, obj.Key, len(got), len(want))
	}
	h.expect("transfer-session-kill", true, "session %s was lost with its actor (NOT_FOUND), the host carried on: a new transfer stored the object", open.ID)
	return nil
}

// call sends one request through tr and decodes the reply into out (nil: ignored).
func call(ctx context.Context, tr *client.Transport, subject string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	reply, err := tr.Request(ctx, subject, body, nil)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Data, out)
}
