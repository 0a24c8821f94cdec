package sessions

// The registry of open sessions and its byte budget, in the host actor: opening and
// parking sessions, routing their calls, reserving bytes for them, closing and reaping
// them. Everything here runs in the host actor's Receive; the checks at the bottom are
// pure.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/protocol"
)

// entry is one open session in the registry.
type entry struct {
	// Set at open and never changed: the session actor reads them.
	id     string
	op     string
	meta   json.RawMessage
	chunk  int
	client string         // ClientOf the open's reply subject: whose share its bytes are
	caller string         // its opener's token `sub` ("" without one): nobody else may touch it
	codec  protocol.Codec // its opener's: every exchange on it must use it
	opened time.Time      // MaxLifetime counts from here
	pid    *actor.PID
	ctx    context.Context // the handler's; cancelled when the session closes

	// The host actor's alone.
	cancel   context.CancelFunc
	lastUsed time.Time
	pending  int   // calls routed to it and not yet answered
	bytes    int64 // reserved from the host's budget
	closed   bool
}

// route takes a received call: an open, or a call on a session, which goes on to the
// session's actor. Unknown sessions are answered here (closing one succeeds), and so
// is a close, which needs nothing of the session actor.
//
// Calls reach a session actor only through here, and only the host actor poisons
// session actors, so every call it routes is ahead of the poison pill in the session
// actor's inbox and is answered: hollywood drops what lands behind a pill without a
// trace (hollywood v1.0.5).
func (a *hostActor) route(cl *call) {
	h := a.h
	if cl.op == protocol.TransferOpen {
		a.open(cl)
		return
	}
	e := h.sessions[cl.id]
	var foreign error
	if e != nil {
		foreign = belongs(e, cl)
	}
	switch {
	case e == nil && cl.op == protocol.TransferClose:
		cl.respond(protocol.Empty{})
	case e == nil:
		cl.fail(notFound(cl.id))
	case foreign != nil:
		cl.fail(foreign)
	case cl.op == protocol.TransferClose:
		a.closeSession(e, "closed by its client")
		a.publish()
		cl.respond(protocol.Empty{})
	default:
		e.pending++
		e.lastUsed = h.clock.Now()
		cl.entry = e
		a.eng.Send(e.pid, cl)
	}
}

// callEnded counts the answer of a call routed to e.
func (a *hostActor) callEnded(e *entry) {
	if e.closed {
		return
	}
	e.pending--
	e.lastUsed = a.h.clock.Now()
}

// open answers an open request: negotiate, check the limits, spawn the session actor.
func (a *hostActor) open(cl *call) {
	h := a.h
	if err := h.checkLease(protocol.TransferOpen); err != nil {
		cl.fail(err)
		return
	}
	req := cl.req.(*protocol.TransferOpenRequest)
	if _, ok := h.cfg.Handlers[req.Operation]; !ok {
		cl.fail(protocol.Errorf(protocol.InvalidArgument, "transfer operation %q is not served on %s (served: %s)", req.Operation, h.prefix, h.operations()))
		return
	}
	if err := uploadCodec(req.Operation, cl.codec); err != nil {
		cl.fail(err)
		return
	}
	if len(req.Metadata) > protocol.MaxTransferMetadataBytes {
		cl.fail(protocol.Errorf(protocol.InvalidArgument, "transfer metadata of %d bytes is above the limit of %d", len(req.Metadata), protocol.MaxTransferMetadataBytes))
		return
	}
	if req.Size < 0 {
		cl.fail(protocol.Errorf(protocol.InvalidArgument, "transfer size %d is negative", req.Size))
		return
	}
	if limit, key := h.uploadLimit(req.Operation); req.Size > limit {
		cl.fail(protocol.Errorf(protocol.PayloadTooLarge, "transfer of %d bytes is above the limit of %d per session (%s)", req.Size, limit, key))
		return
	}
	chunk, err := h.negotiate(req.ChunkBytes)
	if err != nil {
		cl.fail(err)
		return
	}
	e, err := a.newSession(sessionOf{client: ClientOf(cl.msg.Reply), caller: cl.caller, codec: cl.codec}, req.Operation, req.Metadata, chunk, nil, nil)
	if err != nil {
		cl.fail(err)
		return
	}
	cl.respond(protocol.TransferOpenReply{ID: e.id, ChunkBytes: chunk})
}

// park answers a parkCall: a session that is already started and serves data.
func (a *hostActor) park(p *parkCall) {
	if p.abandoned.Load() {
		p.answer(parkResult{err: context.Canceled})
		return
	}
	chunk := a.h.maxChunk()
	e, err := a.newSession(p.of, protocol.OverflowReplyOperation, nil, chunk, p.data, p.held)
	if err != nil {
		p.answer(parkResult{err: err})
		return
	}
	p.answer(parkResult{id: e.id, chunk: chunk})
}

func (p *parkCall) answer(r parkResult) {
	select {
	case p.done <- r:
	default: // answered before (a crash after the answer)
	}
}

// sessionOf is whose a new session is: the client whose budget share it takes, the
// caller it belongs to and the codec it speaks.
type sessionOf struct {
	client, caller string
	codec          protocol.Codec
}

// newSession registers a session and spawns its actor. parked, when not nil, is served
// as the result of a session that is already started; held, when not nil, is what its
// call reserved for it, which the session takes over.
func (a *hostActor) newSession(of sessionOf, op string, meta []byte, chunk int, parked []byte, held *Reservation) (*entry, error) {
	client := of.client
	h := a.h
	if h.epoch == nil {
		return nil, protocol.Refused("transfer host %s of engine %s is not serving, so it opened nothing; retry", h.prefix, h.owner)
	}
	if len(h.sessions) >= h.cfg.MaxSessions {
		return nil, protocol.Exhausted("transfer host %s has %d sessions open, its limit (limits.sessions); retry later", h.prefix, len(h.sessions))
	}
	if n := h.perClient[client]; n >= h.cfg.MaxSessionsPerClient {
		return nil, protocol.Exhausted("this client has %d sessions open on %s, its limit (limits.client_sessions); close one and retry", n, h.prefix)
	}
	e := &entry{id: NewSessionID(h.owner), op: op, meta: meta, chunk: chunk, client: client, caller: of.caller, codec: of.codec}
	fit := a.fits
	if held != nil {
		fit = func(e *entry, n int64) error { return a.adopt(e, n, held) }
	}
	if err := fit(e, int64(len(parked))); err != nil {
		return nil, err
	}
	_, local, _ := ParseSessionID(e.id)
	e.ctx, e.cancel = context.WithCancel(h.epoch)
	e.lastUsed = h.clock.Now()
	e.opened = e.lastUsed
	h.sessionActors.Update(func(n int) (int, bool) { return n + 1, true })
	// Named under the host, but not a hollywood child: hollywood v1.0.5 stops a parent
	// by poisoning each child again and waiting without a timeout, and a second poison
	// of an actor already stopping never completes (hollywood v1.0.5). Session actors are
	// poisoned exactly once, by closeSession, and Close waits for them itself.
	e.pid = a.eng.Spawn(h.sessionProducer(e, parked), a.self.ID+"/session", actors.SpawnOpts(local)...)
	h.sessions[e.id] = e
	h.perClient[client]++
	a.take(e, int64(len(parked)))
	a.publish()
	return e, nil
}

// closeSession ends session e: out of the registry, its bytes back to the budget, its
// handler cancelled and its actor stopped. The caller publishes.
func (a *hostActor) closeSession(e *entry, reason string) {
	if e.closed {
		return
	}
	h := a.h
	e.closed = true
	delete(h.sessions, e.id)
	if h.perClient[e.client]--; h.perClient[e.client] <= 0 {
		delete(h.perClient, e.client)
	}
	a.give(e, e.bytes)
	e.cancel()
	a.eng.Poison(e.pid) // its Stopped answers what it still holds
	h.log.Debug("transfer session closed", zap.String("session", e.id), zap.String("reason", reason))
}

// endSession closes a session whose start failed, then answers the start. A session
// closed meanwhile was closed first: its start is NOT_FOUND, as any call on it.
func (a *hostActor) endSession(m endSession) {
	if m.e.closed {
		m.call.fail(notFound(m.e.id))
		return
	}
	a.closeSession(m.e, m.reason)
	a.publish()
	m.call.fail(m.err)
}

// reserve answers a session actor's reserve.
func (a *hostActor) reserve(m reserve) {
	e := m.e
	if e.closed {
		a.eng.Send(e.pid, reserved{err: notFound(e.id)}) // behind its pill: its Stopped answers
		return
	}
	a.give(e, min(m.release, e.bytes))
	if err := a.fits(e, m.n); err != nil {
		if m.ends {
			// Answered, then ended, in this one turn: the client's next call reaches
			// the host after it and finds the session gone. Answering first keeps the
			// session actor's stop, which answers what it holds NOT_FOUND, from
			// answering this start before its error does.
			m.call.fail(err)
			a.closeSession(e, "its result did not fit")
			a.publish()
		}
		a.eng.Send(e.pid, reserved{err: err})
		return
	}
	a.take(e, m.n)
	a.eng.Send(e.pid, reserved{})
}

// fits checks that session e may hold n more bytes, and takes them from the budget
// when it may: take must follow (or give, if the session is not registered after all).
func (a *hostActor) fits(e *entry, n int64) error {
	h := a.h
	if limit, key := h.uploadLimit(e.op); e.bytes+n > limit {
		return protocol.Errorf(protocol.PayloadTooLarge, "transfer session %s would hold %d bytes, above the limit of %d per session (%s)", e.id, e.bytes+n, limit, key)
	}
	return h.cfg.Budget.take(e.client, n)
}

// take counts n bytes that fits took from the budget as session e's.
func (a *hostActor) take(e *entry, n int64) {
	e.bytes += n
	a.h.buffered += n
}

// give hands n of session e's bytes back to the budget.
func (a *hostActor) give(e *entry, n int64) {
	e.bytes -= n
	a.h.buffered -= n
	a.h.cfg.Budget.give(e.client, n)
}

// reap closes the sessions no call has touched for the idle timeout.
func (a *hostActor) reap() {
	h := a.h
	now := h.clock.Now()
	reaped := false
	for _, e := range h.sessions {
		switch idle, age := now.Sub(e.lastUsed), now.Sub(e.opened); {
		case e.pending == 0 && idle >= h.cfg.IdleTimeout:
			a.closeSession(e, fmt.Sprintf("idle for %s", idle.Round(time.Second)))
			reaped = true
		case age >= h.cfg.MaxLifetime:
			// Its calls in flight are answered NOT_FOUND by the session actor's end.
			a.closeSession(e, fmt.Sprintf("open for %s, its maximum lifetime (limits.session_max_seconds)", age.Round(time.Second)))
			reaped = true
		}
	}
	if reaped {
		a.publish()
	}
	if h.afterReap != nil {
		h.afterReap(now)
	}
}

// maxChunk is the largest chunk the host offers now.
func (h *TransferHost) maxChunk() int {
	return int(min(int64(h.cfg.ChunkBytes), h.nc.MaxPayload()/2))
}

// negotiate answers a requested chunk size with the one the session uses.
func (h *TransferHost) negotiate(requested int) (int, error) {
	limit := h.maxChunk()
	if limit < protocol.MinChunkBytes {
		return 0, protocol.Errorf(protocol.Internal, "the broker's max payload of %d bytes is too small for transfers", h.nc.MaxPayload())
	}
	switch {
	case requested == 0:
		return limit, nil
	case requested < protocol.MinChunkBytes:
		return 0, protocol.Errorf(protocol.InvalidArgument, "chunk_bytes %d is below the minimum of %d", requested, protocol.MinChunkBytes)
	default:
		return min(requested, limit), nil
	}
}

// operations lists the served operations, for error messages.
func (h *TransferHost) operations() string {
	ops := make([]string, 0, len(h.cfg.Handlers))
	for op := range h.cfg.Handlers {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return strings.Join(ops, ", ")
}

func notFound(id string) error {
	return protocol.Errorf(protocol.NotFound, "transfer session %s expired or was closed", id)
}

// checkLease refuses an operation when the engine has not confirmed its lease within
// lease/2: it must run nothing, like a primary's call (docs/design.md §5.8).
func (h *TransferHost) checkLease(op string) error {
	if h.cfg.LeaseValid() {
		return nil
	}
	return protocol.Refused("transfer %s on %s: this engine has not confirmed its lease within lease/2, so it ran nothing; retry", op, h.prefix)
}

// validID checks that id is a well-formed session id owned by this host.
func (h *TransferHost) validID(id string) error {
	owner, _, err := ParseSessionID(id)
	if err != nil {
		return err
	}
	if owner != h.owner {
		return protocol.Errorf(protocol.NotFound, "transfer session %s belongs to engine %s, not %s", id, owner, h.owner)
	}
	return nil
}
