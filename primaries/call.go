package primaries

// The request hot path: micro callback -> worker -> reply queue (reply.go). It never
// goes through the actor: it reads only what a run fixes when it is made, counts its
// calls and checks the lease before running one.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// run is one period of serving: from Serve to Stop. Its context is the context of its
// calls; its counter counts them from receipt to reply.
type run struct {
	// Fixed when the actor makes the run; the hot path reads them.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	calls    *counter     // calls received and not yet answered
	jobs     chan job     // unbuffered: a send succeeds only to an idle worker
	nworkers atomic.Int64 // workers started, at most MaxConcurrent
	workers  *counter     // workers not yet returned; they return once ctx is cancelled

	// received is closed (allReceived) once every call routed to the run's drained
	// subscriptions before their confirmed UNSUB has reached the callback, or the
	// confirmation failed.
	received     chan struct{}
	receivedOnce sync.Once

	// The actor's (role.go): touched only in Receive, and by Close once no actor can run.
	ms        micro.Service // nil until the subscribe step has added it
	confirmed bool          // the broker confirmed the subscriptions
	stopping  bool          // StopAccepting or Stop ends (or has ended) the subscriptions
	draining  bool          // published in the view: see runView
	watched   bool          // a drain step waits for the run
	drainTo   []*actor.PID  // the StopAccepting senders to tell Drained
}

func newRun() *run {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &run{ctx: ctx, cancel: cancel, calls: newCounter(), jobs: make(chan job), workers: newCounter(),
		received: make(chan struct{})}
}

// allReceived closes received; safe to call more than once.
func (r *run) allReceived() { r.receivedOnce.Do(func() { close(r.received) }) }

// finished returns nil once the run has answered every call it received (all that was
// routed to it, when draining) and, if it was cancelled, its workers have returned; or
// ctx's error.
func (r *run) finished(ctx context.Context, draining bool) error {
	if draining {
		select {
		case <-r.received:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if err := r.calls.wait(ctx); err != nil {
		return err
	}
	if r.ctx.Err() != nil { // stopped: its idle workers are on their way out
		return r.workers.wait(ctx)
	}
	return nil
}

// handler is the micro callback of one endpoint. micro runs it for one call at a time,
// so it only counts the call, takes a slot and hands the call to a worker, or, for an
// inline service, runs it there; with every slot taken the call waits in the backlog
// (backlog.go), never the callback.
func (p *Primary) handler(r *run, name string, op Operation) micro.Handler {
	observe := p.observers[name]
	var inline context.Context // the endpoint's inline calls run under it, with its reply scratch
	if p.inline {
		inline = inlineCtx{Context: r.ctx, scratch: new(replyScratch)}
	}
	var pb *ProtoOperation // the endpoint's protobuf protocol, nil: JSON only
	if o, ok := p.svc.Protobuf[name]; ok {
		pb = &o
	}
	reserves := slices.Contains(p.svc.Reserves, name)
	return micro.HandlerFunc(func(req micro.Request) {
		r.calls.add()
		j := job{name: name, op: op, req: req, observe: observe, inline: inline, reserves: reserves}
		if pb != nil && (!protocol.IsJSON(req.Data()) || uploaded(req)) {
			j.op, j.pb = pb.Run, pb
			if j.inline != nil && uploaded(req) {
				// Its request is read over NATS first: never on micro's callback.
				j.inline = nil
			}
		}
		if observe != nil {
			j.received = time.Now()
		}
		select {
		case p.sem <- struct{}{}: // the common case: a slot is free
		default:
			p.enqueue(r, j)
			return
		}
		if r.ctx.Err() != nil {
			p.refuse(r, j, true)
			return
		}
		if j.inline != nil {
			p.serve(r, j)
			return
		}
		r.dispatch(p, j)
	})
}

// job is one received call waiting for a worker; it holds a slot.
type job struct {
	name     string
	op       Operation
	req      micro.Request
	inline   context.Context // an inline call's (inlineCtx), answered at once; nil: pooled
	pb       *ProtoOperation // a protobuf call's protocol (op is its Run); nil: JSON
	observe  CallObserver    // the operation's, nil without Config.OnCall
	received time.Time       // set only with observe
	span     CallSpan        // set only for Config.Tracer
	reserves bool            // its operation reserves memory (Service.Reserves)
}

// scratch is the reply scratch of an inline call, nil for a pooled one.
func (j job) scratch() *replyScratch {
	ic, _ := j.inline.(inlineCtx)
	return ic.scratch
}

// dispatch hands j to an idle worker of the run, starting one if fewer than
// MaxConcurrent exist. Workers live as long as the run: a goroutine per call would
// grow a fresh stack for every call, which costs more than the call itself.
func (r *run) dispatch(p *Primary, j job) {
	select {
	case r.jobs <- j:
		return
	default:
	}
	for {
		n := r.nworkers.Load()
		if n >= int64(p.cfg.MaxConcurrent) {
			break
		}
		if r.nworkers.CompareAndSwap(n, n+1) {
			r.workers.add()
			go r.work(p, j)
			return
		}
	}
	// Every worker exists and we hold a slot, so one of them is between calls and
	// about to wait for the next.
	select {
	case r.jobs <- j:
	case <-r.ctx.Done():
		p.refuse(r, j, true)
	}
}

// work serves calls until the run is cancelled.
func (r *run) work(p *Primary, j job) {
	defer r.workers.done()
	for {
		p.serve(r, j)
		select {
		case j = <-r.jobs:
		case <-r.ctx.Done():
			return
		}
	}
}

// serve runs one call and answers it. The answer releases the call's slot and count
// once it is published.
func (p *Primary) serve(r *run, j job) {
	ctx := r.ctx
	if j.inline != nil {
		ctx = j.inline
	}
	if p.cfg.Tracer != nil {
		ctx, j.span = p.cfg.Tracer.StartCall(ctx, p.svc.Name, j.name, nats.Header(j.req.Headers()), j.req.Data())
	}
	caller, e := p.authenticate(j)
	if e != nil {
		p.fail(r, j, true, e)
		return
	}
	if !p.cfg.LeaseValid() && !failpoint.On(p.cfg.Failpoints, failpoint.SkipLeaseCheck) {
		p.fail(r, j, true, protocol.Refused("this engine has not confirmed its lease within lease/2, so it ran nothing; retry"))
		return
	}
	if r.ctx.Err() != nil {
		p.refuse(r, j, true)
		return
	}
	data, release := j.req.Data(), func() {}
	if j.pb != nil && uploaded(j.req) {
		if data, release, e = p.readUpload(ctx, j, caller); e != nil {
			p.fail(r, j, true, e)
			return
		}
		// Reading an upload may take seconds (a fetch from its owner): the lease is
		// checked again, so a call never runs on a lease unconfirmed for lease/2.
		if !p.cfg.LeaseValid() && !failpoint.On(p.cfg.Failpoints, failpoint.SkipLeaseCheck) {
			release()
			p.fail(r, j, true, protocol.Refused("this engine lost the confirmation of its lease while it read the overflowed request, so it ran nothing; upload the request again and retry"))
			return
		}
		if r.ctx.Err() != nil {
			release()
			p.refuse(r, j, true)
			return
		}
	}
	ctx = failpoint.Stall(p.cfg.Failpoints, ctx, data) // stall-before-write
	var mem *CallMemory
	if j.reserves {
		ctx, mem = p.withMemory(ctx, j)
	}
	p.running.Add(1)
	out, err := p.call(ctx, j.name, j.op, data)
	p.running.Add(-1)
	release() // the request's bytes, when they came from an upload, leave the budget
	held := mem.reservation()
	if err != nil {
		held.Release()
		p.fail(r, j, true, wireError(r.ctx, err))
		return
	}
	// The broker's limit is read from the connection (under the lock its flusher holds
	// while writing) only when a reply exceeds the limit last seen.
	if size := int64(len(out)) + p.okHeaderSize; size > p.maxPayload.Load() {
		limit := p.cfg.Conn.MaxPayload()
		p.maxPayload.Store(limit)
		if size > limit {
			p.overflow(r, j, out, size, held)
			return
		}
	}
	// A reply that fits one message was reserved nothing, unless the broker's limit
	// grew since its read: what it held is the reply's now, bounded like any call's.
	held.Release()
	p.observe(j, "")
	if j.inline != nil {
		// Published before serve returns, so the message can live on this stack, and
		// the reply in the endpoint's scratch: two allocations less per call, which on
		// a busy engine is fewer collections.
		m := nats.Msg{Subject: j.req.Reply(), Header: p.okHeader, Data: out}
		p.publish(&m)
		j.scratch().reclaim(out)
		p.release(r, true)
		return
	}
	p.send(j, answer{msg: &nats.Msg{Subject: j.req.Reply(), Header: p.okHeader, Data: out}, run: r, slot: true})
}

// observe tells the operation's CallObserver and the call's span about an answered
// call.
func (p *Primary) observe(j job, code protocol.Code) {
	if j.span != nil {
		j.span.End(code)
	}
	if j.observe != nil {
		j.observe(code, time.Since(j.received))
	}
}

// overflow answers a call whose reply does not fit one message: parked on the overflow
// host, which takes over what the call reserved (held), or PAYLOAD_TOO_LARGE. The
// operation has run either way. Whatever held still holds afterwards goes back.
func (p *Primary) overflow(r *run, j job, out []byte, size int64, held *sessions.Reservation) {
	defer held.Release()
	if p.cfg.Overflow == nil {
		p.fail(r, j, true, protocol.Errorf(protocol.PayloadTooLarge,
			"the reply of %d bytes is above the broker's max payload of %d and this engine parks no replies; "+
				"the operation may already have completed, do not replay it automatically", size, p.cfg.Conn.MaxPayload()))
		return
	}
	// The overflow host publishes on its own connection from this goroutine; micro's
	// Respond is avoided for the reason given at send. An error means the caller could
	// not be told; its timeout will.
	req := &nats.Msg{Reply: j.req.Reply(), Header: nats.Header(j.req.Headers())}
	if j.pb != nil {
		_ = p.cfg.Overflow.ReplyProtobufHeld(r.ctx, req, j.scratch().keep(out), j.pb.Fail, held)
	} else {
		_ = p.cfg.Overflow.ReplyHeld(r.ctx, req, j.scratch().keep(out), nil, held)
	}
	p.observe(j, "")
	p.release(r, true)
}

// call runs op and turns a panic into an INTERNAL error, so one bad call never takes
// the process down.
func (p *Primary) call(ctx context.Context, name string, op Operation, data []byte) (out []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, protocol.Errorf(protocol.Internal, "operation %s.%s failed: %v", p.svc.Name, name, v)
		}
	}()
	return op(ctx, data)
}

// refuse answers a call that was received but never ran because its run was stopped.
func (p *Primary) refuse(r *run, j job, slot bool) {
	p.fail(r, j, slot, protocol.Refused("%v before the call ran, so it ran nothing; retry", context.Cause(r.ctx)))
}

// wireError is the error reply of a failed call. A context error raised because the
// run was cancelled means the call was interrupted: it may have taken effect, so it is
// not retryable.
func wireError(runCtx context.Context, err error) *protocol.Error {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case runCtx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return &protocol.Error{Code: protocol.Unavailable,
			Message: fmt.Sprintf("%v while the call ran; it may have taken effect, so do not resend it blindly", context.Cause(runCtx))}
	case errors.Is(err, context.DeadlineExceeded):
		return protocol.Errorf(protocol.DeadlineExceeded, "the call ran out of time (%v); it may have taken effect", err)
	default:
		return protocol.Errorf(protocol.Internal, "%v", err)
	}
}
