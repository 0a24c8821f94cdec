package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// DefaultMaxTransferBytes is the largest payload a Transport moves by a transfer or
// fetches as a parked reply, either way, unless WithMaxTransferBytes says otherwise. It
// matches the engine's default per-session limit.
const DefaultMaxTransferBytes = 256 << 20

// maxChunkBytes caps the chunk a client asks for however large the broker's messages
// are, so one chunk never needs more than a few MiB of memory on either side.
const maxChunkBytes = 1 << 20

// transferEnvelopeBytes is what a chunk's message carries besides the chunk: the JSON
// field names, the session id, the sequence, the context member and the headers.
const transferEnvelopeBytes = 512

// closeTimeout bounds the close that ends every session, sent on a fresh context so that
// it also goes out when the caller's context has ended.
const closeTimeout = 2 * time.Second

// errOverLimit is the cause of a refusal for exceeding the Transport's own transfer
// limit, which tells it apart from the engine's PAYLOAD_TOO_LARGE.
var errOverLimit = errors.New("above the client's transfer limit")

// WithMaxTransferBytes bounds what one transfer or one parked reply may carry
// (DefaultMaxTransferBytes if not given). A larger upload is refused before anything is
// sent; a larger download or parked reply is refused as soon as its size is known, and
// its session is closed.
func WithMaxTransferBytes(n int64) Option { return func(t *Transport) { t.maxTransfer = n } }

// Upload runs one transfer session on prefix (e.g.
// protocol.TransferPrefix(protocol.ObjectStorage)) for operation: it opens the session
// with metadata (any value encoding to a JSON object, nil for none), writes data in
// chunks, starts the operation and reads what it produced, which it returns (empty, not
// nil, when the operation produced nothing, as an upload usually does).
//
// The chunk size is negotiated: the client asks for the largest chunk that fits one
// broker message once base64-encoded, at most half the max payload, and uses what the
// host grants. Only the open is resent on "no responders", so an open waits for the next
// engine during a handover like any engine call. Every later call goes to the engine that
// owns the session and fails at once if it is gone. The session is always closed, on
// errors too, with a fresh short context when ctx has ended.
//
// Errors are *CallError values naming the subject of the step that failed. An error
// after the start was answered carries retryable false: the operation has run.
func (t *Transport) Upload(ctx context.Context, prefix, operation string, metadata any, data []byte) ([]byte, error) {
	return t.transfer(ctx, prefix, operation, metadata, data)
}

// Download is Upload without data: it opens a session for operation, starts it and
// returns what it produced.
func (t *Transport) Download(ctx context.Context, prefix, operation string, metadata any) ([]byte, error) {
	return t.transfer(ctx, prefix, operation, metadata, nil)
}

func (t *Transport) transfer(ctx context.Context, prefix, operation string, metadata any, data []byte) ([]byte, error) {
	t.counters.calls.Add(1)
	ctx, cancel := t.bound(ctx)
	defer cancel()
	out, ce := t.runTransfer(ctx, prefix, operation, metadata, data)
	if ce != nil {
		t.counters.fail(ce.Err.Code)
		return nil, ce
	}
	return out, nil
}

func (t *Transport) runTransfer(ctx context.Context, prefix, operation string, metadata any, data []byte) ([]byte, *CallError) {
	open := protocol.TransferOpenSubject(prefix)
	if err := validPrefix(prefix); err != nil {
		return nil, &CallError{Subject: open, Err: protocol.Errorf(protocol.InvalidArgument, "transfer %s: %v", operation, err)}
	}
	req := protocol.TransferOpenRequest{Ctx: protocol.Ctx{Context: requestContext(ctx)}, Operation: operation, Size: int64(len(data))}
	if metadata != nil {
		raw, err := json.Marshal(metadata)
		if err != nil {
			return nil, &CallError{Subject: open, Err: protocol.Errorf(protocol.InvalidArgument, "transfer %s: encode metadata %T: %v", operation, metadata, err), Cause: err}
		}
		if len(raw) > protocol.MaxTransferMetadataBytes {
			return nil, &CallError{Subject: open, Err: protocol.Errorf(protocol.InvalidArgument,
				"transfer %s: metadata of %d bytes is above the limit of %d", operation, len(raw), protocol.MaxTransferMetadataBytes)}
		}
		req.Metadata = raw
	}
	if int64(len(data)) > t.maxTransfer {
		return nil, &CallError{Subject: open, Err: protocol.Errorf(protocol.PayloadTooLarge,
			"transfer %s: upload of %d bytes is above this client's limit of %d", operation, len(data), t.maxTransfer), Cause: errOverLimit}
	}
	chunk, perr := chunkFor(t.MaxPayload())
	if perr != nil {
		return nil, &CallError{Subject: open, Err: perr}
	}
	req.ChunkBytes = chunk

	var opened protocol.TransferOpenReply
	if ce := t.exchange(ctx, open, req, &opened); ce != nil {
		return nil, ce
	}
	if _, _, err := protocol.ParseSessionID(opened.ID); err != nil {
		// A session we cannot address cannot be closed either; it idle-expires.
		return nil, &CallError{Subject: open, Err: protocol.Errorf(protocol.Internal, "transfer %s: the open answered an unusable session id: %v", operation, err), Cause: err}
	}
	if opened.ChunkBytes < protocol.MinChunkBytes {
		t.closeSession(ctx, prefix, opened.ID)
		return nil, &CallError{Subject: open, Err: protocol.Errorf(protocol.Internal,
			"transfer %s: session %s granted chunks of %d bytes, below the minimum of %d", operation, opened.ID, opened.ChunkBytes, protocol.MinChunkBytes)}
	}
	chunk = min(chunk, opened.ChunkBytes)
	defer t.closeSession(ctx, prefix, opened.ID)

	s := session{t: t, prefix: prefix, id: opened.ID}
	for seq := uint64(0); len(data) > 0; seq++ {
		n := min(chunk, len(data))
		if ce := s.write(ctx, seq, data[:n]); ce != nil {
			return nil, ce
		}
		data = data[n:]
	}
	size, ce := s.start(ctx)
	if ce != nil {
		return nil, ce
	}
	if size > t.maxTransfer {
		return nil, ranAlready(&CallError{Subject: s.subject(protocol.TransferStart), Err: protocol.Errorf(protocol.PayloadTooLarge,
			"transfer %s: session %s produced %d bytes, above this client's limit of %d", operation, s.id, size, t.maxTransfer), Cause: errOverLimit})
	}
	if size == 0 {
		return []byte{}, nil
	}
	out, ce := s.readAll(ctx, size)
	if ce != nil {
		return nil, ranAlready(ce)
	}
	return out, nil
}

// session is a transfer session on its owner's subjects.
type session struct {
	t      *Transport
	prefix string
	id     string
}

// subject is the owner-scoped subject of op; the id was checked when the session was
// opened or announced.
func (s session) subject(op string) string {
	subject, _ := protocol.TransferSessionSubject(s.prefix, s.id, op)
	return subject
}

func (s session) write(ctx context.Context, seq uint64, data []byte) *CallError {
	return s.t.exchange(ctx, s.subject(protocol.TransferWrite), protocol.TransferWriteRequest{
		Ctx: protocol.Ctx{Context: requestContext(ctx)}, ID: s.id, Sequence: seq, Data: data,
	}, &protocol.TransferWriteReply{})
}

func (s session) start(ctx context.Context) (int64, *CallError) {
	var r protocol.TransferStartReply
	ce := s.t.exchange(ctx, s.subject(protocol.TransferStart), protocol.TransferStartRequest{
		Ctx: protocol.Ctx{Context: requestContext(ctx)}, ID: s.id,
	}, &r)
	if ce == nil && r.Size < 0 {
		ce = &CallError{Subject: s.subject(protocol.TransferStart), Err: protocol.Errorf(protocol.Internal, "transfer session %s announced %d bytes", s.id, r.Size)}
	}
	return r.Size, ce
}

// readAll reads a started session from sequence 0 until the chunk marked done and checks
// that it got exactly the size the host announced.
func (s session) readAll(ctx context.Context, size int64) ([]byte, *CallError) {
	subject := s.subject(protocol.TransferRead)
	out := make([]byte, 0, size)
	for seq := uint64(0); ; seq++ {
		var r protocol.TransferReadReply
		if ce := s.t.exchange(ctx, subject, protocol.TransferReadRequest{
			Ctx: protocol.Ctx{Context: requestContext(ctx)}, ID: s.id, Sequence: seq,
		}, &r); ce != nil {
			return nil, ce
		}
		switch {
		case r.Sequence != seq:
			return nil, &CallError{Subject: subject, Err: protocol.Errorf(protocol.Internal,
				"transfer session %s answered read %d with sequence %d", s.id, seq, r.Sequence)}
		case int64(len(out))+int64(len(r.Data)) > size:
			return nil, &CallError{Subject: subject, Err: protocol.Errorf(protocol.Internal,
				"transfer session %s sent more than the %d bytes it announced", s.id, size)}
		}
		out = append(out, r.Data...)
		if r.Done {
			break
		}
	}
	if int64(len(out)) != size {
		return nil, &CallError{Subject: subject, Err: protocol.Errorf(protocol.Internal,
			"transfer session %s ended after %d of the %d bytes it announced", s.id, len(out), size)}
	}
	return out, nil
}

// closeSession ends session id on its owner, on a fresh context: the session must go
// even when the caller's context has ended. A failed close is not reported: what the
// caller wanted has succeeded or failed already, and the host closes an idle session
// by itself.
func (t *Transport) closeSession(ctx context.Context, prefix, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	s := session{t: t, prefix: prefix, id: id}
	_ = t.exchange(ctx, s.subject(protocol.TransferClose), protocol.TransferCloseRequest{
		Ctx: protocol.Ctx{Context: requestContext(ctx)}, ID: id,
	}, nil)
}

// exchange is one JSON request of a transfer: req encoded, the reply decoded into out
// (nil: ignored). It is not counted as a call of its own: the transfer or the call it
// serves is.
func (t *Transport) exchange(ctx context.Context, subject string, req, out any) *CallError {
	body, err := json.Marshal(req)
	if err != nil {
		return &CallError{Subject: subject, Err: protocol.Errorf(protocol.InvalidArgument, "encode %T: %v", req, err), Cause: err}
	}
	r, ce := t.request(ctx, subject, body, nil, false)
	if ce != nil || out == nil {
		return ce
	}
	if err := json.Unmarshal(r.Data, out); err != nil {
		return &CallError{Subject: subject, Instance: r.Header.Get(protocol.HeaderInstance), Err: protocol.Errorf(protocol.Internal, "decode reply %.64q: %v", r.Data, err), Cause: err}
	}
	return nil
}

// ranAlready marks an error that happened after the operation ran: resending the whole
// call would run it again, so it is not retryable whatever the step's own error says
// (a vanished owner is "no responders", which on its own means nothing ran).
func ranAlready(ce *CallError) *CallError {
	if !ce.Err.Retryable {
		return ce
	}
	e := *ce.Err
	e.Retryable = false
	e.Message += "; the operation had already run, do not replay it automatically"
	return &CallError{Subject: ce.Subject, Instance: ce.Instance, Err: &e, Cause: ce.Cause}
}

// chunkFor is the chunk a client asks for on a broker whose max payload is maxPayload:
// the largest that fits one message as base64 with its envelope, at most half the max
// payload (what a host offers anyway) and at most maxChunkBytes.
func chunkFor(maxPayload int64) (int, *protocol.Error) {
	if maxPayload <= 0 {
		return 0, protocol.Refused("the NATS connection has not learnt the broker's max payload yet; it is not connected, and nothing was sent")
	}
	c := min(maxPayload/2, (maxPayload-transferEnvelopeBytes)/4*3, maxChunkBytes)
	if c < protocol.MinChunkBytes {
		return 0, protocol.Errorf(protocol.PayloadTooLarge,
			"the broker's max payload of %d bytes is too small for transfers, which need chunks of at least %d bytes", maxPayload, protocol.MinChunkBytes)
	}
	return int(c), nil
}

func validPrefix(p string) error {
	if p == "" || strings.ContainsAny(p, " *>\t\r\n") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return fmt.Errorf("prefix %q is not a subject without wildcards", p)
	}
	return nil
}

// acceptsOverflow reports whether a request says its caller can read a parked reply.
func acceptsOverflow(h nats.Header) bool { return h.Get(protocol.HeaderOverflow) == "1" }

// parkedRef finds the parked reply a reply announces: by the headers
// Abi-Overflow-Reply and Abi-Overflow-Size (the engine's way, with a body that may be
// empty), refined by an OverflowEnvelope body, or by the envelope body alone. ok is false
// for an ordinary reply.
func parkedRef(m *nats.Msg) (ref *protocol.OverflowRef, ok bool, perr *protocol.Error) {
	id, size, hasHeader, err := protocol.OverflowFromHeaders(m.Header.Get)
	if err != nil {
		return &protocol.OverflowRef{ID: id, Prefix: protocol.OverflowPrefix}, true,
			protocol.Errorf(protocol.Internal, "malformed parked reply: %v", err)
	}
	env, hasBody := overflowEnvelope(m.Data)
	switch {
	case hasHeader && hasBody && env.ID == id:
		ref = env
		if ref.Size != size {
			return ref, true, protocol.Errorf(protocol.Internal, "parked reply %s announces %d bytes in its header and %d in its body", id, size, ref.Size)
		}
	case hasHeader:
		ref = &protocol.OverflowRef{ID: id, Size: size, Prefix: protocol.OverflowPrefix}
	case hasBody:
		ref = env
	default:
		return nil, false, nil
	}
	if ref.Prefix == "" {
		ref.Prefix = protocol.OverflowPrefix
	}
	if _, _, err := protocol.ParseSessionID(ref.ID); err != nil {
		return ref, true, protocol.Errorf(protocol.Internal, "parked reply: %v", err)
	}
	if err := validPrefix(ref.Prefix); err != nil {
		return ref, true, protocol.Errorf(protocol.Internal, "parked reply %s: %v", ref.ID, err)
	}
	if ref.Size < 0 {
		return ref, true, protocol.Errorf(protocol.Internal, "parked reply %s announces %d bytes", ref.ID, ref.Size)
	}
	return ref, true, nil
}

// overflowEnvelope decodes body as an OverflowEnvelope and nothing else: a reply whose
// body merely has an "overflow" member among others is an ordinary reply.
func overflowEnvelope(body []byte) (*protocol.OverflowRef, bool) {
	if !mayBeEnvelope(body) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var env protocol.OverflowEnvelope
	if err := dec.Decode(&env); err != nil || env.Overflow == nil || env.Overflow.ID == "" || dec.More() {
		return nil, false
	}
	return env.Overflow, true
}

// mayBeEnvelope is overflowEnvelope's cheap test, run on every reply: the body is an
// object whose first member is "overflow", its only one, as encoding/json would match
// it (any case, or a name with escapes, which is left to the decoder).
func mayBeEnvelope(body []byte) bool {
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	i := 1
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
		i++
	}
	const name = "overflow"
	if i >= len(body) || body[i] != '"' {
		return false
	}
	rest := body[i+1:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return false
	}
	if bytes.IndexByte(rest[:end], '\\') >= 0 {
		return true
	}
	return len(rest[:end]) == len(name) && bytes.EqualFold(rest[:end], []byte(name))
}

// unpark replaces a reply that announces a parked reply (ref, found by parkedRef with
// perr) with the reply itself: it reads the parked session on its owner, checks the
// size and closes the session, whatever happens. The result carries the
// announcement's headers without the overflow ones. The operation has run by then, so
// no error from here is retryable.
func (t *Transport) unpark(ctx context.Context, subject string, m *nats.Msg, ref *protocol.OverflowRef, perr *protocol.Error) (*nats.Msg, *CallError) {
	instance := m.Header.Get(protocol.HeaderInstance)
	if perr != nil {
		if _, _, err := protocol.ParseSessionID(ref.ID); err == nil && validPrefix(ref.Prefix) == nil {
			t.closeSession(ctx, ref.Prefix, ref.ID)
		}
		return nil, &CallError{Subject: subject, Instance: instance, Err: perr}
	}
	defer t.closeSession(ctx, ref.Prefix, ref.ID)
	if ref.Size > t.maxTransfer {
		return nil, &CallError{Subject: subject, Instance: instance, Cause: errOverLimit, Err: protocol.Errorf(protocol.PayloadTooLarge,
			"the reply of %d bytes, parked as %s, is above this client's limit of %d; the operation has run, do not replay it automatically",
			ref.Size, ref.ID, t.maxTransfer)}
	}
	s := session{t: t, prefix: ref.Prefix, id: ref.ID}
	data, ce := s.readAll(ctx, ref.Size)
	if ce != nil {
		return nil, ranAlready(ce)
	}
	out := &nats.Msg{Subject: m.Subject, Reply: m.Reply, Data: data, Header: nats.Header{}}
	for k, vs := range m.Header {
		out.Header[k] = vs
	}
	out.Header.Del(protocol.HeaderOverflowReply)
	out.Header.Del(protocol.HeaderOverflowSize)
	return out, nil
}
