package sessions

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/protocol"
)

// reapTick asks the host actor to close idle sessions.
type reapTick struct{}

// startDone carries a handler's outcome back to its session actor.
type startDone struct {
	call   *call
	result []byte
	err    error
	upload int64 // bytes of the upload the handler consumed
}

// parkCall asks the host actor to park data as a read-only session (the overflow host).
type parkCall struct {
	data      []byte
	done      chan parkResult // buffered: the actor never waits for the caller
	abandoned atomic.Bool
}

type parkResult struct {
	id    string
	chunk int
	err   error
}

// Producer makes the host actor. It holds no state of its own: everything is in the
// TransferHost, so the actor that actors.Recover restarts in place after a panic (an
// actors.Kill, or a bug) carries on with the same subscriptions and sessions.
func (h *TransferHost) Producer() actor.Producer {
	return func() actor.Receiver { return &hostActor{h: h} }
}

// SpawnOptions are the options the host actor must be spawned with: actors.SpawnOpts
// (the recover middleware and the restart backstop) with an id made of the prefix and
// the owner, so two hosts never collide.
func (h *TransferHost) SpawnOptions() []actor.OptFunc {
	return actors.SpawnOpts(h.prefix + "@" + h.owner)
}

// Spawn spawns the host actor at the top of engine e (kind "transfer") and returns its
// PID. A parent actor spawns it as its child with Producer and SpawnOptions instead.
func (h *TransferHost) Spawn(e *actor.Engine) *actor.PID {
	return e.Spawn(h.Producer(), "transfer", h.SpawnOptions()...)
}

// crashed answers the message a transfer actor was handling when it panicked, counts
// the crash and logs it. actors.Recover has already recovered the panic.
func (h *TransferHost) crashed(c *actor.Context) {
	h.restarts.Add(1)
	h.log.Error("transfer actor crashed; restarted in place", "pid", c.PID().String(), "message", fmt.Sprintf("%T", c.Message()))
	crash := protocol.Errorf(protocol.Internal, "the engine's transfer actor crashed while handling this call")
	switch m := c.Message().(type) {
	case *call:
		m.fail(crash)
	case startDone:
		m.call.fail(crash)
	case *parkCall:
		select {
		case m.done <- parkResult{err: crash}:
		default: // answered before the crash
		}
	}
}

// hostActor opens sessions, reaps idle ones and obeys the role commands.
type hostActor struct{ h *TransferHost }

var _ actors.Restarter = (*hostActor)(nil)

// Restart is the in-place restart after a panic: the host actor has nothing of its
// own to reset.
func (a *hostActor) Restart(c *actor.Context) { a.h.crashed(c) }

func (a *hostActor) Receive(c *actor.Context) {
	h := a.h
	switch m := c.Message().(type) {
	case actor.Initialized:
		h.attach(c.Engine(), c.PID())
	case actor.Started:
	case actor.Stopped:
		// Stopped without Stop first (a parent went away): end what the host holds.
		h.goRole(h.Stop)
	case *call:
		a.open(c, m)
	case *parkCall:
		a.park(c, m)
	case reapTick:
		a.reap()
	case actors.Serve:
		a.serve(c)
	case actors.StopAccepting:
		a.stopAccepting(c, m)
	case actors.Stop:
		a.stop(c)
	default:
		h.log.Warn("transfer host actor ignored an unknown message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *hostActor) serve(c *actor.Context) {
	h, eng, to, self := a.h, c.Engine(), c.Sender(), c.PID()
	h.goRole(func() {
		if err := h.Serve(h.life); err != nil {
			h.log.Error("transfer host did not start serving", "error", err)
			tell(eng, to, actors.ServeFailed{From: self, Err: err})
			return
		}
		tell(eng, to, actors.Accepting{From: self, On: true})
	})
}

func (a *hostActor) stopAccepting(c *actor.Context, m actors.StopAccepting) {
	h, eng, to, self := a.h, c.Engine(), c.Sender(), c.PID()
	h.goRole(func() {
		ctx, cancel := context.WithCancel(h.life)
		defer cancel()
		// Stop ends the wait for the drain: what is left was closed, not drained.
		h.mu.Lock()
		if h.epoch != nil {
			defer context.AfterFunc(h.epoch, cancel)()
		}
		h.mu.Unlock()
		if !m.Deadline.IsZero() {
			var cancelDeadline context.CancelFunc
			ctx, cancelDeadline = context.WithDeadline(ctx, m.Deadline)
			defer cancelDeadline()
		}
		if err := h.StopAccepting(ctx); err != nil {
			h.log.Error("transfer host: stop accepting failed", "error", err)
		}
		tell(eng, to, actors.Accepting{From: self, On: false})
		if err := h.SessionsFinished(ctx); err != nil {
			h.log.Warn("transfer host: sessions not finished by the deadline", "error", err)
			return
		}
		tell(eng, to, actors.Drained{From: self})
	})
}

func (a *hostActor) stop(c *actor.Context) {
	h, eng, to, self := a.h, c.Engine(), c.Sender(), c.PID()
	h.goRole(func() {
		h.Stop()
		tell(eng, to, actors.Down{From: self})
	})
}

func tell(eng *actor.Engine, to *actor.PID, msg any) {
	if to != nil {
		eng.Send(to, msg)
	}
}

// open answers an open request: negotiate, check the limits, spawn the session actor.
func (a *hostActor) open(c *actor.Context, cl *call) {
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
	if len(req.Metadata) > protocol.MaxTransferMetadataBytes {
		cl.fail(protocol.Errorf(protocol.InvalidArgument, "transfer metadata of %d bytes is above the limit of %d", len(req.Metadata), protocol.MaxTransferMetadataBytes))
		return
	}
	if req.Size < 0 {
		cl.fail(protocol.Errorf(protocol.InvalidArgument, "transfer size %d is negative", req.Size))
		return
	}
	if req.Size > h.cfg.MaxSessionBytes {
		cl.fail(protocol.Errorf(protocol.PayloadTooLarge, "transfer of %d bytes is above the limit of %d per session", req.Size, h.cfg.MaxSessionBytes))
		return
	}
	chunk, err := h.negotiate(req.ChunkBytes)
	if err != nil {
		cl.fail(err)
		return
	}
	e, err := a.newSession(c, req.Operation, req.Metadata, chunk, nil)
	if err != nil {
		cl.fail(err)
		return
	}
	cl.respond(protocol.TransferOpenReply{ID: e.id, ChunkBytes: chunk})
}

// park answers a parkCall: a session that is already started and serves data.
func (a *hostActor) park(c *actor.Context, p *parkCall) {
	if p.abandoned.Load() {
		p.done <- parkResult{err: context.Canceled}
		return
	}
	chunk := a.h.maxChunk()
	e, err := a.newSession(c, protocol.OverflowReplyOperation, nil, chunk, p.data)
	if err != nil {
		p.done <- parkResult{err: err}
		return
	}
	p.done <- parkResult{id: e.id, chunk: chunk}
}

// newSession spawns a session actor and registers it. parked, when not nil, is served
// as the result of a session that is already started.
func (a *hostActor) newSession(c *actor.Context, op string, meta []byte, chunk int, parked []byte) (*entry, error) {
	h := a.h
	if err := h.canOpen(); err != nil {
		return nil, err
	}
	e := &entry{id: NewSessionID(h.owner), op: op, meta: meta, chunk: chunk}
	_, local, _ := ParseSessionID(e.id)
	h.mu.Lock()
	h.liveActors++
	h.mu.Unlock()
	// Named under the host, but not a hollywood child: hollywood v1.0.5 stops a parent
	// by poisoning each child again and waiting without a timeout, and a second poison
	// of an actor already stopping never completes (go-deps §1.2). Session actors are
	// poisoned exactly once, by closeLocked, and Close waits for them itself.
	pid := c.Engine().Spawn(h.sessionProducer(e, parked), c.PID().ID+"/session", actors.SpawnOpts(local)...)
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.canOpenLocked()
	if err == nil {
		e.pid = pid
		e.lastUsed = h.clock.Now()
		e.ctx, e.cancel = context.WithCancel(h.epoch)
		h.sessions[e.id] = e
		if err = h.reserveLocked(e, int64(len(parked))); err != nil {
			h.closeLocked(e, "its parked reply did not fit", false)
		}
	}
	if err != nil {
		e.closed = true // never registered: its Stopped has nothing to close
		c.Engine().Poison(pid)
		return nil, err
	}
	return e, nil
}

func (h *TransferHost) canOpen() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.canOpenLocked()
}

func (h *TransferHost) canOpenLocked() error {
	if !h.serving {
		return protocol.Refused("transfer host %s of engine %s is not serving, so it opened nothing; retry", h.prefix, h.owner)
	}
	if len(h.sessions) >= h.cfg.MaxSessions {
		return protocol.Errorf(protocol.ResourceExhausted, "transfer host %s has %d sessions open, its limit", h.prefix, len(h.sessions))
	}
	return nil
}

// reap closes the sessions no call has touched for the idle timeout.
func (a *hostActor) reap() {
	h := a.h
	now := h.clock.Now()
	h.mu.Lock()
	for _, e := range h.sessions {
		if e.pending == 0 && !e.running && now.Sub(e.lastUsed) >= h.cfg.IdleTimeout {
			h.closeLocked(e, fmt.Sprintf("idle for %s", now.Sub(e.lastUsed).Round(time.Second)), true)
		}
	}
	h.mu.Unlock()
	if h.afterReap != nil {
		h.afterReap()
	}
}

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
type sessionActor struct {
	h         *TransferHost
	e         *entry
	upload    []byte
	nextWrite uint64
	running   bool
	started   bool
	result    []byte
	nextRead  uint64
	finished  bool
}

var _ actors.Restarter = (*sessionActor)(nil)

// Restart is the in-place restart after a panic: the session's bytes and sequence
// numbers were the crashed instance's, so the session is lost. It is closed, and every
// call queued behind the crash is answered NOT_FOUND.
func (s *sessionActor) Restart(c *actor.Context) {
	s.h.crashed(c)
	*s = sessionActor{h: s.h, e: s.e}
	s.h.closeEntry(s.e, "its actor crashed and the session's data with it", true)
}

func (s *sessionActor) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Initialized, actor.Started:
	case actor.Stopped:
		s.h.sessionActorGone(s.e)
	case *call:
		if s.h.isClosed(s.e) {
			m.fail(notFound(s.e.id))
			return
		}
		if m.op != protocol.TransferClose {
			if err := s.h.checkLease(m.op); err != nil {
				m.fail(err) // the session stays as it was: nothing ran
				return
			}
		}
		switch m.op {
		case protocol.TransferWrite:
			s.write(m)
		case protocol.TransferStart:
			s.start(c, m)
		case protocol.TransferRead:
			s.read(m)
		default:
			s.h.closeEntry(s.e, "closed by its client", true)
			m.respond(protocol.Empty{})
		}
	case startDone:
		s.startDone(m)
	}
}

func (s *sessionActor) write(cl *call) {
	req := cl.req.(*protocol.TransferWriteRequest)
	switch {
	case s.started || s.running:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s is already started; writes come before start", s.e.id))
	case req.Sequence != s.nextWrite:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s: write sequence %d, expected %d", s.e.id, req.Sequence, s.nextWrite))
	case len(req.Data) > s.e.chunk:
		cl.fail(protocol.Errorf(protocol.PayloadTooLarge, "transfer session %s: chunk of %d bytes is above the negotiated %d", s.e.id, len(req.Data), s.e.chunk))
	default:
		if err := s.h.reserve(s.e, int64(len(req.Data))); err != nil {
			cl.fail(err)
			return
		}
		s.upload = append(s.upload, req.Data...)
		s.nextWrite++
		cl.respond(protocol.TransferWriteReply{Size: int64(len(s.upload))})
	}
}

func (s *sessionActor) start(c *actor.Context, cl *call) {
	h, e := s.h, s.e
	if s.started || s.running {
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s is already started; a start is never replayed", e.id))
		return
	}
	handler := h.cfg.Handlers[e.op]
	req := cl.req.(*protocol.TransferStartRequest)
	upload := s.upload
	s.upload = nil
	tr := TransferRequest{SessionID: e.id, Operation: e.op, Metadata: e.meta, Upload: upload}
	eng, self := c.Engine(), c.PID()

	// The handler goroutine is added to h.work with mu held and e open, so Stop (which
	// closes every session with mu held, then waits for h.work) always waits for it.
	h.mu.Lock()
	if e.closed {
		h.mu.Unlock()
		cl.fail(notFound(e.id))
		return
	}
	s.running, e.running = true, true
	ctx, cancel := e.ctx, context.CancelFunc(func() {})
	if req.Context != nil && req.Context.TimeoutMS > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Context.TimeoutMS)*time.Millisecond)
	}
	h.work.Go(func() {
		defer cancel()
		result, err := handler(ctx, tr)
		h.mu.Lock()
		closed := e.closed
		if !closed {
			eng.Send(self, startDone{call: cl, result: result, err: err, upload: int64(len(upload))})
		}
		h.mu.Unlock()
		if closed {
			cl.fail(notFound(e.id))
		}
	})
	h.mu.Unlock()
}

func (s *sessionActor) startDone(d startDone) {
	h, e := s.h, s.e
	s.running = false
	h.mu.Lock()
	e.running = false
	h.mu.Unlock()
	h.release(e, d.upload)
	// A failed start ends the session before it is answered, so a client that reads the
	// error finds the session gone.
	if d.err != nil {
		h.log.Info("transfer operation failed", "session", e.id, "operation", e.op, "error", d.err)
		h.closeEntry(e, "its operation failed", true)
		d.call.fail(d.err)
		return
	}
	if err := h.reserve(e, int64(len(d.result))); err != nil {
		h.closeEntry(e, "its result did not fit", true)
		d.call.fail(err)
		return
	}
	s.started, s.result = true, d.result
	d.call.respond(protocol.TransferStartReply{Size: int64(len(d.result))})
}

func (s *sessionActor) read(cl *call) {
	req := cl.req.(*protocol.TransferReadRequest)
	e := s.e
	switch {
	case !s.started:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s is not started; start it before reading", e.id))
	case req.Sequence != s.nextRead:
		cl.fail(protocol.Errorf(protocol.Conflict, "transfer session %s: read sequence %d, expected %d", e.id, req.Sequence, s.nextRead))
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
