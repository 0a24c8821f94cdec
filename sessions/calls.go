package sessions

import (
	"encoding/json"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/protocol"
)

// call is one received transfer request on its way to the actor that answers it. It is
// answered exactly once (respond or fail), from whichever goroutine gets there first;
// answering ends its count in the host's calls in flight and, for a call routed to a
// session, tells the host actor the session was used.
type call struct {
	h     *TransferHost
	msg   *nats.Msg
	op    string
	id    string // the session, for calls on one
	req   any    // *protocol.Transfer<Op>Request, whatever the codec
	codec protocol.Codec
	// caller is the `sub` of the call's service token, "" without one (a JSON call to
	// an engine without a secret): a session belongs to its opener's.
	caller string
	entry  *entry // set by the host actor when it routes the call to the session actor
	done   atomic.Bool
}

// respond answers the call with v, in the call's codec.
func (c *call) respond(v any) {
	encode := jsonMsg
	if c.codec == protocol.Protobuf {
		encode = protoMsg
	}
	m, err := encode(c.h.owner, v)
	if err != nil {
		c.fail(err)
		return
	}
	c.send(m)
}

func (c *call) fail(err error) {
	if c.codec == protocol.Protobuf {
		c.send(protoErrorMsg(c.h.owner, c.op, err))
		return
	}
	c.send(errorMsg(c.h.owner, err))
}

func (c *call) send(m *nats.Msg) {
	if !c.done.CompareAndSwap(false, true) {
		return
	}
	if c.entry != nil {
		// Before the reply: the host actor hears of it before anything the client does
		// next, and so counts the session's idle time from here.
		c.h.tell(callEnded{e: c.entry})
	}
	if c.msg.Reply != "" {
		m.Subject = c.msg.Reply
		if err := c.h.nc.PublishMsg(m); err != nil {
			c.h.log.Warn("transfer reply not sent", zap.String("operation", c.op), zap.Error(err))
		}
	}
	c.h.endCall()
}

// beginCall counts a call in flight. The count makes SessionsFinished wait for calls
// whose session is already gone but whose answer is not yet sent.
func (h *TransferHost) beginCall() { h.inflight.Add(1) }

// admit counts a received call in flight, or refuses it when the host already has its
// limit in flight: actor inboxes grow without bound, so the bound is here, at the edge.
// A refused call is counted too, until its refusal is sent.
func (h *TransferHost) admit() error {
	if n := h.inflight.Add(1); n > int64(h.cfg.MaxCallsInFlight) {
		return protocol.Errorf(protocol.ResourceExhausted, "transfer host %s has %d calls in flight, its limit", h.prefix, h.cfg.MaxCallsInFlight)
	}
	return nil
}

// endCall ends the count of an answered call, and wakes SessionsFinished when nothing
// is in flight any more.
func (h *TransferHost) endCall() {
	if h.inflight.Add(-1) == 0 {
		h.quiet.Update(func(n uint64) (uint64, bool) { return n + 1, true })
	}
}

// The NATS callbacks below are the hot path. They read nothing of the registry: each
// decodes its request, counts it at the edge and sends it to the host actor, which
// routes it (registry.go says why).

// routeOpen is the callback of <prefix>.open.
func (h *TransferHost) routeOpen(m *nats.Msg) {
	c := &call{h: h, msg: m, op: protocol.TransferOpen, codec: codecOf(m)}
	if err := h.admit(); err != nil {
		c.fail(err)
		return
	}
	if err := h.authenticate(c); err != nil {
		c.fail(err)
		return
	}
	if c.codec == protocol.Protobuf {
		_, req, err := decodeProto(protocol.TransferOpen, m.Data)
		if err != nil {
			c.fail(err)
			return
		}
		c.req = req
		h.deliver(c)
		return
	}
	var req protocol.TransferOpenRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		c.fail(protocol.Errorf(protocol.InvalidArgument, "transfer open request on %s is not valid JSON: %v", m.Subject, err))
		return
	}
	c.req = &req
	h.deliver(c)
}

// route is the callback of <prefix>.<owner>.<op>. The session's codec is checked by
// the host actor, which knows the session.
func (h *TransferHost) route(op string, m *nats.Msg) {
	c := &call{h: h, msg: m, op: op, codec: codecOf(m)}
	if err := h.admit(); err != nil {
		c.fail(err)
		return
	}
	if err := h.authenticate(c); err != nil {
		c.fail(err)
		return
	}
	decode := decodeOp
	if c.codec == protocol.Protobuf {
		decode = decodeProto
	}
	id, req, err := decode(op, m.Data)
	if err == nil {
		err = h.validID(id)
	}
	if err != nil {
		c.fail(err)
		return
	}
	c.id, c.req = id, req
	h.deliver(c)
}

// deliver hands a decoded call to the host actor, or refuses it once the actor has
// stopped (nothing would answer it).
func (h *TransferHost) deliver(c *call) {
	if h.actorDone.Err() != nil {
		c.fail(protocol.Refused("transfer host %s of engine %s has stopped, so it ran nothing; retry", h.prefix, h.owner))
		return
	}
	h.tell(c)
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
