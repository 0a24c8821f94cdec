package primaries

import (
	"context"

	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// CallMemory is one call's hold on the engine's memory budget, for the operations a
// Service names in Reserves: such an operation learns the size of what it is about to
// read (get_object: from its backend, objectstorage.ReadBuffer) and calls Reserve
// before it reads it, so that a reply too large for one message, which the overflow
// host parks, is counted from before its read to the end of its parked session, and
// calls beyond the budget are refused having read nothing. The Primary gives back what a call reserved once its
// reply is sent or failed, or hands it to the parked reply, which gives it back when
// its caller has read it or it expires.
type CallMemory struct {
	p        *Primary
	client   string // whose share of the budget: the request's connection (sessions.ClientOf)
	overflow bool   // the request carried Abi-Overflow: 1, so a large reply may be parked
	protobuf bool   // the call speaks protobuf: its reply is the operation's message
	held     *sessions.Reservation
}

// memoryKey is the context key of a call's CallMemory.
type memoryKey struct{}

// MemoryOf is the CallMemory of the call ctx belongs to, nil for a call of an
// operation that reserves nothing (and outside a Primary). Reserve on nil reserves
// nothing.
func MemoryOf(ctx context.Context) *CallMemory {
	m, _ := ctx.Value(memoryKey{}).(*CallMemory)
	return m
}

// Reserve reserves hold bytes, all the call will hold at once (get_object: its reply's
// buffer, which the object is read into), when its reply of reply bytes will not fit
// one message. A reply that
// fits is not reserved: it is bounded by the calls in flight like every call's. It
// refuses, having reserved nothing, with PAYLOAD_TOO_LARGE when the reply could never
// be parked (the request did not ask for it, the engine parks no replies, or it is
// above the overflow limit or a client's share of the budget) and RESOURCE_EXHAUSTED,
// retryable, when the budget has no room now. Called again (a read started over), it
// gives back what it held first. It runs on the call's goroutine.
func (m *CallMemory) Reserve(hold, reply int64) error {
	if m == nil {
		return nil
	}
	m.held.Release()
	m.held = nil
	p := m.p
	limit := p.cfg.Conn.MaxPayload()
	switch {
	case reply+p.okHeaderSize <= limit:
		return nil
	case !m.overflow:
		return protocol.Errorf(protocol.PayloadTooLarge,
			"its reply of %d bytes would be above the broker's max payload of %d and the request did not carry %s: 1", reply, limit, protocol.HeaderOverflow)
	case p.cfg.Overflow == nil:
		return protocol.Errorf(protocol.PayloadTooLarge,
			"its reply of %d bytes would be above the broker's max payload of %d and this engine parks no replies", reply, limit)
	}
	held, err := p.cfg.Overflow.Reserve(m.client, hold, reply)
	m.held = held
	return err
}

// Protobuf says the call is answered in protobuf (its reply is the operation's
// response message), not JSON: the reply's size depends on it.
func (m *CallMemory) Protobuf() bool { return m != nil && m.protobuf }

// Held is what the call holds reserved now.
func (m *CallMemory) Held() int64 {
	if m == nil {
		return 0
	}
	return m.held.Held()
}

// reservation is what the call reserved, nil for nothing: the Primary's to release or
// hand to the parked reply once the operation has returned.
func (m *CallMemory) reservation() *sessions.Reservation {
	if m == nil {
		return nil
	}
	return m.held
}

// withMemory gives ctx, the context of call j, a CallMemory. An inline call's context
// stays an inlineCtx, which Handle recognises.
func (p *Primary) withMemory(ctx context.Context, j job) (context.Context, *CallMemory) {
	m := &CallMemory{p: p, client: sessions.ClientOf(j.req.Reply()), overflow: j.req.Headers().Get(protocol.HeaderOverflow) == "1", protobuf: j.pb != nil}
	if ic, ok := ctx.(inlineCtx); ok {
		ic.mem = m
		return ic, m
	}
	return context.WithValue(ctx, memoryKey{}, m), m
}
