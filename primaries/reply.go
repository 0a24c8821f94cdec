package primaries

// How a call's answer reaches its caller: the error envelope, and the queue that
// publishes replies in batches and then releases what each call held.

import (
	"errors"
	"runtime"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

// maxYields bounds how often the goroutine publishing replies yields to let more
// replies join its batch (see replyQueue).
const maxYields = 3

// fail answers a call with the envelope of docs/design.md §4.3.
func (p *Primary) fail(r *run, j job, slot bool, e *protocol.Error) {
	p.observe(j, e.Code)
	msg := p.protoErrorMsg(j, e)
	if msg == nil {
		msg = p.errorMsg(j.req.Reply(), e)
	}
	p.send(j, answer{run: r, slot: slot, msg: msg})
}

// protoErrorMsg is the error reply of a protobuf call: the operation's response
// message with only its error set, and our code header, never micro's error headers
// (design note in protobuf.go). nil for a JSON call.
func (p *Primary) protoErrorMsg(j job, e *protocol.Error) *nats.Msg {
	if j.pb == nil {
		return nil
	}
	return &nats.Msg{
		Subject: j.req.Reply(),
		Header: nats.Header{
			protocol.HeaderInstance:  []string{p.cfg.InstanceID},
			protocol.HeaderErrorCode: []string{string(e.Code)},
		},
		Data: j.pb.Fail(e),
	}
}

// errorMsg is an error reply: micro's error headers, our code header and
// {"error": {...}}.
func (p *Primary) errorMsg(subject string, e *protocol.Error) *nats.Msg {
	body := protocol.Envelope{Error: e}.AppendJSON(make([]byte, 0, replySize+len(e.Message)))
	desc := e.Message
	if desc == "" {
		desc = string(e.Code)
	}
	return &nats.Msg{
		Subject: subject,
		Header: nats.Header{
			protocol.HeaderInstance:  []string{p.cfg.InstanceID},
			protocol.HeaderErrorCode: []string{string(e.Code)},
			micro.ErrorHeader:        []string{desc},
			micro.ErrorCodeHeader:    []string{strconv.Itoa(e.Code.HTTPStatus())},
		},
		Data: body,
	}
}

// answer is a reply on its way to the caller's inbox, and what it holds until it has
// been published: the call's count in its run and, for a call that took one, a slot.
type answer struct {
	msg  *nats.Msg // Subject empty: a publish, not a request; nobody waits for an answer
	run  *run
	slot bool
}

// replyQueue batches replies: calls that finish at about the same time are published
// back to back by one goroutine, so the connection writes them in one system call
// instead of one each (the connection's flusher otherwise runs between two workers'
// replies). On a busy engine most of a call's cost is system calls, so this matters.
type replyQueue struct {
	mu      sync.Mutex
	pending []answer
	spare   []answer
	leader  bool // a goroutine is publishing; it publishes what is appended meanwhile
}

// send publishes a, the answer of j, or leaves it to the goroutine already
// publishing. Answers are published with PublishMsg, not req.Respond or req.Error:
// micro reads the request's response error after the callback returns, which races
// with a worker that answers later. An inline call's answer is published at once:
// micro's callback has nothing to batch with, and yielding there would only delay the
// next call.
func (p *Primary) send(j job, a answer) {
	if j.inline != nil {
		p.publish(a.msg)
		p.release(a.run, a.slot)
		return
	}
	q := &p.replies
	q.mu.Lock()
	q.pending = append(q.pending, a)
	if q.leader {
		q.mu.Unlock()
		return
	}
	q.leader = true
	q.mu.Unlock()
	// Let the calls finishing right now join this batch: yield once, and a few more
	// times while other calls still run. On an idle engine nothing else is runnable and
	// each yield returns at once.
	for i := 0; i < maxYields && (i == 0 || p.running.Load() > 0); i++ {
		runtime.Gosched()
	}
	for {
		q.mu.Lock()
		batch := q.pending
		if len(batch) == 0 {
			q.leader = false
			q.mu.Unlock()
			return
		}
		q.pending = q.spare[:0]
		q.mu.Unlock()
		for i := range batch {
			a := &batch[i]
			if a.msg.Subject != "" {
				p.publish(a.msg)
			}
			p.release(a.run, a.slot)
			*a = answer{}
		}
		q.mu.Lock()
		q.spare = batch[:0]
		q.mu.Unlock()
	}
}

// publish sends a reply. A reply the connection refuses as too large (the broker's
// limit shrank since it was last read, on a reconnect) becomes PAYLOAD_TOO_LARGE; any
// other failure means the connection is closed, and the caller's timeout tells it.
func (p *Primary) publish(m *nats.Msg) {
	err := p.cfg.Conn.PublishMsg(m)
	if !errors.Is(err, nats.ErrMaxPayload) {
		return
	}
	e := protocol.Errorf(protocol.PayloadTooLarge, "the reply of %d bytes is above the broker's max payload of %d; "+
		"the operation may already have completed, do not replay it automatically", len(m.Data), p.cfg.Conn.MaxPayload())
	_ = p.cfg.Conn.PublishMsg(p.errorMsg(m.Subject, e))
}

// release ends a call once its answer has been sent: its slot, if it took one, and its
// count.
func (p *Primary) release(r *run, slot bool) {
	if slot {
		p.next() // to the oldest call waiting, or freed
	}
	r.calls.done()
}
