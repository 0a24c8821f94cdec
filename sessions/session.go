package sessions

import (
	"context"
	"time"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/protocol"
)

// sessionProducer makes the actor of session e.
func (h *TransferHost) sessionProducer(e *entry, parked []byte) actor.Producer {
	return func() actor.Receiver {
		s := &sessionActor{h: h, e: e}
		if parked != nil {
			s.started, s.result = true, parked
		}
		return s
	}
}

// sessionActor holds one session's bytes and sequence numbers, and nothing else does.
// Its fields are touched only in Receive. The budget is the host actor's: a write, and
// a start's result, wait for the host actor's reserved before they are answered, and
// the calls that come meanwhile wait in held, in order.
type sessionActor struct {
	h *TransferHost
	e *entry

	upload    [][]byte // the chunks written, as decoded: one copy of each, joined at start
	uploaded  int64    // their bytes
	nextWrite uint64
	started   bool
	result    []byte
	nextRead  uint64
	finished  bool
	running   *call         // the start whose handler runs
	ahead     int64         // what the running handler reserved before producing it
	asking    *reserveAhead // the running handler's Reserve, waiting for the host actor's reserved
	waiting   *awaiting     // what waits for the host actor's reserved
	held      []*call       // calls that came while something waited
	lost      bool          // the actor crashed: the session's data went with it
}

// awaiting is a write, or a start's result, waiting for its bytes.
type awaiting struct {
	call  *call
	data  []byte
	start bool
}

var _ actors.Restarter = (*sessionActor)(nil)

func (s *sessionActor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Initialized, actor.Started:
	case actor.Stopped:
		s.stopped()
	case *call:
		s.take(c, m)
	case reserved:
		s.reserved(c, m)
	case reserveAhead:
		s.reserveAhead(m)
	case startDone:
		s.startDone(m)
	case *takeUpload:
		s.takeUpload(m)
	}
}

// take handles a call the host actor routed here.
func (s *sessionActor) take(c *actor.Context, cl *call) {
	switch {
	case s.lost:
		cl.fail(notFound(s.e.id))
		return
	case s.waiting != nil:
		s.held = append(s.held, cl)
		return
	}
	if err := s.h.checkLease(cl.op); err != nil {
		cl.fail(err) // the session stays as it was: nothing ran
		return
	}
	switch cl.op {
	case protocol.TransferWrite:
		s.write(cl)
	case protocol.TransferStart:
		s.start(c, cl)
	case protocol.TransferRead:
		s.read(cl)
	}
}

func (s *sessionActor) write(cl *call) {
	req := cl.req.(*protocol.TransferWriteRequest)
	switch {
	case s.started || s.running != nil:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s is already started; writes come before start", s.e.id))
	case req.Sequence != s.nextWrite:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s: write sequence %d, expected %d", s.e.id, req.Sequence, s.nextWrite))
	case len(req.Data) > s.e.chunk:
		cl.fail(protocol.Errorf(protocol.PayloadTooLarge, "transfer session %s: chunk of %d bytes is above the negotiated %d", s.e.id, len(req.Data), s.e.chunk))
	case len(req.Data) == 0:
		s.nextWrite++
		cl.respond(protocol.TransferWriteReply{Size: s.uploaded})
	default:
		s.waiting = &awaiting{call: cl, data: req.Data}
		s.h.tell(reserve{e: s.e, n: int64(len(req.Data))})
	}
}

// reserveAhead forwards a running handler's Reserve to the host actor. Only the
// handler of the running start may reserve, one call at a time.
func (s *sessionActor) reserveAhead(m reserveAhead) {
	switch {
	case s.lost || s.running != m.call:
		m.reply <- notFound(s.e.id)
	case s.asking != nil:
		m.reply <- protocol.Errorf(protocol.Internal, "transfer session %s: a handler reserved twice at once", s.e.id)
	case m.n <= 0:
		m.reply <- nil
	default:
		s.asking = &m
		s.h.tell(reserve{e: s.e, n: m.n})
	}
}

// reserved goes on with what waited for its bytes, then with the calls held meanwhile.
func (s *sessionActor) reserved(c *actor.Context, r reserved) {
	if a := s.asking; a != nil {
		// While a handler runs, its Reserve is the only thing that waits for bytes:
		// writes are refused, and the result is reserved once it has returned.
		s.asking = nil
		if r.err == nil {
			s.ahead += a.n
		}
		a.reply <- r.err
		return
	}
	w := s.waiting
	if w == nil {
		return
	}
	s.waiting = nil
	switch {
	case r.err != nil:
		w.call.fail(r.err) // a start's result that did not fit was answered by the host
	case w.start:
		s.started, s.result = true, w.data
		w.call.respond(protocol.TransferStartReply{Size: int64(len(w.data))})
	default:
		// Kept as written rather than appended to one buffer, whose doubling would
		// hold up to twice what the budget counts.
		s.upload = append(s.upload, w.data)
		s.uploaded += int64(len(w.data))
		s.nextWrite++
		w.call.respond(protocol.TransferWriteReply{Size: s.uploaded})
	}
	for s.waiting == nil && len(s.held) > 0 {
		cl := s.held[0]
		s.held = s.held[1:]
		s.take(c, cl)
	}
}

func (s *sessionActor) start(c *actor.Context, cl *call) {
	h, e := s.h, s.e
	if s.started || s.running != nil {
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s is already started; a start is never replayed", e.id))
		return
	}
	if e.ctx.Err() != nil { // closed, its poison pill not yet here
		cl.fail(notFound(e.id))
		return
	}
	handler := h.cfg.Handlers[e.op]
	req := cl.req.(*protocol.TransferStartRequest)
	tr := TransferRequest{SessionID: e.id, Operation: e.op, Codec: e.codec, Caller: e.caller, Metadata: e.meta, Upload: s.joined()}
	eng, self := c.Engine(), c.PID()
	tr.Reserve = func(ctx context.Context, n int64) error {
		m := reserveAhead{call: cl, n: n, reply: make(chan error, 1)}
		eng.Send(self, m)
		select {
		case err := <-m.reply:
			return err
		case <-ctx.Done():
			// The actor answers on the buffered reply whenever it gets there; what it
			// reserved meanwhile goes back when the session ends.
			return context.Cause(ctx)
		}
	}
	ctx, cancel := e.ctx, context.CancelFunc(func() {})
	if req.Context != nil && req.Context.TimeoutMS > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Context.TimeoutMS)*time.Millisecond)
	}
	// The work group is shut from Stop on, and Stop waits for what it holds: a handler
	// either starts before Stop waits, or not at all.
	if !h.work.Go(func() {
		defer cancel()
		result, err := handler(ctx, tr)
		eng.Send(self, startDone{call: cl, result: result, err: err, upload: int64(len(tr.Upload))})
	}) {
		cancel()
		cl.fail(notFound(e.id))
		return
	}
	s.upload, s.uploaded = nil, 0
	s.running, s.ahead = cl, 0
}

// joined is the upload in one buffer; nil when nothing was written. The chunks are
// dropped as they are copied, so the session holds the upload about once.
func (s *sessionActor) joined() []byte {
	switch len(s.upload) {
	case 0:
		return nil
	case 1:
		return s.upload[0]
	}
	out := make([]byte, 0, s.uploaded)
	for i, c := range s.upload {
		out = append(out, c...)
		s.upload[i] = nil
	}
	return out
}

func (s *sessionActor) startDone(d startDone) {
	if s.running != d.call {
		return // answered already: the actor crashed meanwhile
	}
	s.running = nil
	ahead := s.ahead
	s.ahead = 0
	e := s.e
	if e.ctx.Err() != nil {
		// Closed while the handler ran (the client's close, the reaper, Stop), which
		// cancelled it: what it returned says nothing the client should read.
		d.call.fail(notFound(e.id))
		return
	}
	if d.err != nil {
		// A failed start ends the session before it is answered, so a client that reads
		// the error finds the session gone: the host actor does both, in that order.
		s.h.log.Info("transfer operation failed", zap.String("session", e.id), zap.String("operation", e.op), zap.Error(d.err))
		s.h.tell(endSession{e: e, reason: "its operation failed", call: d.call, err: d.err})
		return
	}
	// What the handler reserved ahead counts for its result: only a larger result
	// asks for more, a smaller one gives the rest back with the upload.
	n, release := int64(len(d.result))-ahead, d.upload
	if n < 0 {
		n, release = 0, release-n
	}
	s.waiting = &awaiting{call: d.call, data: d.result, start: true}
	s.h.tell(reserve{e: e, n: n, release: release, ends: true, call: d.call})
}

func (s *sessionActor) read(cl *call) {
	req := cl.req.(*protocol.TransferReadRequest)
	e := s.e
	switch {
	case !s.started:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s is not started; start it before reading", e.id))
	case req.Sequence != s.nextRead:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s: read sequence %d, expected %d", e.id, req.Sequence, s.nextRead))
	case e.codec == protocol.Protobuf:
		s.readProto(cl, req.Sequence)
	case s.finished:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s has no chunk %d: its last chunk was %d", e.id, req.Sequence, s.nextRead-1))
	default:
		off := int64(req.Sequence) * int64(e.chunk)
		end := min(off+int64(e.chunk), int64(len(s.result)))
		done := end >= int64(len(s.result))
		s.nextRead++
		s.finished = done
		cl.respond(protocol.TransferReadReply{Data: s.result[off:end], Sequence: req.Sequence, Done: done})
	}
}

// readProto answers a read of a protobuf session as the Python clients read: data
// pieces (done false, frame_end on the last), then done in a reply of its own, with
// no data and the sequence asked, which does not advance (so a read repeated there is
// done again). An empty result is done at once.
func (s *sessionActor) readProto(cl *call, seq uint64) {
	off := int64(seq) * int64(s.e.chunk)
	n := int64(len(s.result))
	if off >= n {
		cl.respond(pbRead{sequence: seq, done: true})
		return
	}
	end := min(off+int64(s.e.chunk), n)
	s.nextRead++
	cl.respond(pbRead{data: s.result[off:end], sequence: seq, frameEnd: end == n})
}

// failHeld answers every call the actor holds with err.
func (s *sessionActor) failHeld(err error) {
	if s.waiting != nil {
		s.waiting.call.fail(err)
	}
	if s.running != nil {
		s.running.fail(err)
	}
	if s.asking != nil {
		s.asking.reply <- err
	}
	for _, cl := range s.held {
		cl.fail(err)
	}
	s.waiting, s.running, s.asking, s.held = nil, nil, nil, nil
}

// stopped is the end of the session actor: the session was closed, and whatever it
// still holds is answered NOT_FOUND.
func (s *sessionActor) stopped() {
	s.failHeld(notFound(s.e.id))
	// The bytes go back to the runtime with the actor; hollywood may keep the
	// receiver a while longer.
	s.upload, s.result = nil, nil
	s.h.sessionActors.Update(func(n int) (int, bool) { return n - 1, true })
}

// Restart is the in-place restart after a panic: the session's bytes and sequence
// numbers were the crashed instance's, so the session is lost. The message that
// crashed is answered INTERNAL, every call held NOT_FOUND, and so is every call that
// comes until the host actor has closed the session.
func (s *sessionActor) Restart(c *actor.Context) {
	s.h.crashed(c)
	crash := protocol.Errorf(protocol.Internal, "the engine's transfer actor crashed while handling this call")
	switch m := c.Message().(type) {
	case *call:
		m.fail(crash)
	case startDone:
		m.call.fail(crash)
	case reserveAhead:
		m.reply <- crash
	case *takeUpload:
		m.answer(takeResult{err: crash})
	}
	s.failHeld(notFound(s.e.id))
	*s = sessionActor{h: s.h, e: s.e, lost: true}
	s.h.tell(sessionLost{e: s.e})
}
