package sessions

import (
	"encoding/json"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// call is one received transfer request on its way to the actor that answers it. It is
// answered exactly once (respond or fail), from whichever goroutine gets there first;
// answering ends its count in the host's in-flight calls.
type call struct {
	h     *TransferHost
	msg   *nats.Msg
	op    string
	req   any    // *protocol.Transfer<Op>Request
	entry *entry // the session, for calls routed to one
	done  atomic.Bool
}

func (c *call) respond(v any) {
	m, err := jsonMsg(c.h.owner, v)
	if err != nil {
		c.fail(err)
		return
	}
	c.send(m)
}

func (c *call) fail(err error) { c.send(errorMsg(c.h.owner, err)) }

func (c *call) send(m *nats.Msg) {
	if !c.done.CompareAndSwap(false, true) {
		return
	}
	if c.msg.Reply != "" {
		m.Subject = c.msg.Reply
		if err := c.h.nc.PublishMsg(m); err != nil {
			c.h.log.Warn("transfer reply not sent", "operation", c.op, "error", err)
		}
	}
	c.h.endCall(c.entry)
}

// beginCall counts a call in flight. The count makes SessionsFinished wait for calls
// whose session is already gone but whose answer is not yet sent.
func (h *TransferHost) beginCall() {
	h.mu.Lock()
	h.inflight++
	h.mu.Unlock()
}

// admit counts a received call in flight, or refuses it when the host already has its
// limit in flight: actor inboxes grow without bound, so the bound is here, at the edge.
// A refused call is counted too, until its refusal is sent.
func (h *TransferHost) admit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight++
	if h.inflight > h.cfg.MaxCallsInFlight {
		return protocol.Errorf(protocol.ResourceExhausted, "transfer host %s has %d calls in flight, its limit", h.prefix, h.cfg.MaxCallsInFlight)
	}
	return nil
}

func (h *TransferHost) endCall(e *entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight--
	if e != nil {
		e.pending--
		e.lastUsed = h.clock.Now()
	}
	h.notifyLocked()
}

// routeOpen is the callback of <prefix>.open: decode, then hand the open to the host
// actor, which alone spawns session actors.
func (h *TransferHost) routeOpen(m *nats.Msg) {
	c := &call{h: h, msg: m, op: protocol.TransferOpen}
	if err := h.admit(); err != nil {
		c.fail(err)
		return
	}
	h.mu.Lock()
	eng, pid := h.engine, h.pid
	h.mu.Unlock()
	var req protocol.TransferOpenRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		c.fail(protocol.Errorf(protocol.InvalidArgument, "transfer open request on %s is not valid JSON: %v", m.Subject, err))
		return
	}
	c.req = &req
	eng.Send(pid, c)
}

// route is the callback of <prefix>.<owner>.<op>: decode, find the session and hand
// the call to its actor. Unknown sessions are answered here; closing one succeeds.
func (h *TransferHost) route(op string, m *nats.Msg) {
	c := &call{h: h, msg: m, op: op}
	if err := h.admit(); err != nil {
		c.fail(err)
		return
	}
	id, req, err := decodeOp(op, m.Data)
	if err == nil {
		err = h.validID(id)
	}
	if err != nil {
		c.fail(err)
		return
	}
	c.req = req
	h.mu.Lock()
	e := h.sessions[id]
	if e == nil || e.pid == nil {
		h.mu.Unlock()
		if op == protocol.TransferClose {
			c.respond(protocol.Empty{})
		} else {
			c.fail(notFound(id))
		}
		return
	}
	e.pending++
	e.lastUsed = h.clock.Now()
	c.entry = e
	h.engine.Send(e.pid, c)
	h.mu.Unlock()
}

func decodeOp(op string, data []byte) (id string, req any, err error) {
	bad := func(err error) (string, any, error) {
		return "", nil, protocol.Errorf(protocol.InvalidArgument, "transfer %s request is not valid JSON: %v", op, err)
	}
	switch op {
	case protocol.TransferWrite:
		var r protocol.TransferWriteRequest
		if err := json.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.ID, &r, nil
	case protocol.TransferStart:
		var r protocol.TransferStartRequest
		if err := json.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.ID, &r, nil
	case protocol.TransferRead:
		var r protocol.TransferReadRequest
		if err := json.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.ID, &r, nil
	default:
		var r protocol.TransferCloseRequest
		if err := json.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.ID, &r, nil
	}
}
