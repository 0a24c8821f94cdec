package sessions

// The checks every transfer call goes through (chunk size, lease, session id) and the
// registry of open sessions with its byte budget. Everything here is TransferHost state
// guarded by its mu.

import (
	"sort"
	"strings"

	"github.com/abi-engine/engine/protocol"
)

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

// notifyLocked wakes SessionsFinished when nothing is open or in flight. mu held.
func (h *TransferHost) notifyLocked() {
	if len(h.sessions) == 0 && h.inflight == 0 {
		close(h.idle)
		h.idle = make(chan struct{})
	}
}

// closeLocked ends session e: out of the registry, its bytes back to the budget, its
// handler cancelled and, with poison, its actor stopped. Every message sent to a
// session actor is sent with mu held after checking e.closed, so the poison pill lands
// behind all of them and each is still answered. mu held.
func (h *TransferHost) closeLocked(e *entry, reason string, poison bool) {
	if e.closed {
		return
	}
	e.closed = true
	delete(h.sessions, e.id)
	h.buffered -= e.bytes
	e.bytes = 0
	e.cancel()
	if poison && e.pid != nil {
		h.engine.Poison(e.pid)
	}
	h.log.Debug("transfer session closed", "session", e.id, "reason", reason)
	h.notifyLocked()
}

func (h *TransferHost) closeEntry(e *entry, reason string, poison bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeLocked(e, reason, poison)
}

func (h *TransferHost) isClosed(e *entry) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return e.closed
}

// reserve takes n bytes from the budget for session e.
func (h *TransferHost) reserve(e *entry, n int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reserveLocked(e, n)
}

func (h *TransferHost) reserveLocked(e *entry, n int64) error {
	if e.closed {
		return notFound(e.id)
	}
	if e.bytes+n > h.cfg.MaxSessionBytes {
		return protocol.Errorf(protocol.PayloadTooLarge, "transfer session %s would hold %d bytes, above the limit of %d per session", e.id, e.bytes+n, h.cfg.MaxSessionBytes)
	}
	if h.buffered+n > h.cfg.MaxBufferedBytes {
		return protocol.Errorf(protocol.ResourceExhausted, "transfer host %s holds %d bytes; %d more would pass its limit of %d", h.prefix, h.buffered, n, h.cfg.MaxBufferedBytes)
	}
	e.bytes += n
	h.buffered += n
	return nil
}

// release gives n bytes of session e back to the budget.
func (h *TransferHost) release(e *entry, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.closed {
		return // closing gave everything back already
	}
	n = min(n, e.bytes)
	e.bytes -= n
	h.buffered -= n
}

func notFound(id string) error {
	return protocol.Errorf(protocol.NotFound, "transfer session %s expired or was closed", id)
}

// checkLease refuses an operation when the engine has not confirmed its lease within
// lease/2: it must run nothing, like a primary's call (design §5.8).
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
