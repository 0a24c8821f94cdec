package primaries

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// MaxConcurrentLimit is the largest MaxConcurrent a Primary accepts (design §4.4).
const MaxConcurrentLimit = 4096

// flushTimeout bounds a broker round trip when the caller's context has no deadline.
const flushTimeout = 10 * time.Second

// Config is what a Primary needs besides its Service.
type Config struct {
	// Conn is the service connection. The Primary never closes it.
	Conn *nats.Conn
	// InstanceID is the engine instance id, stamped on every reply (Abi-Engine-Instance).
	InstanceID string
	// MaxConcurrent is nats.max_concurrent_requests: how many calls of this service run
	// at once, 1..MaxConcurrentLimit. Further calls wait, counted as in flight.
	MaxConcurrent int
	// LeaseValid reports, with one atomic load, whether the engine's last successful
	// lease renewal was sent less than lease/2 ago (design §5.8). A call runs only when
	// it returns true; otherwise it is answered UNAVAILABLE, retryable.
	LeaseValid func() bool
	// Overflow, optional, parks replies too large for one message (the engine's
	// sessions.OverflowHost). Without it such a reply is PAYLOAD_TOO_LARGE.
	Overflow Overflow
	// OnCall, optional, is told of every call once its answer is on its way: the
	// operation, the error code ("" when it succeeded) and the time from receipt. It runs
	// on the calls' goroutines, so it must be quick and safe for concurrent use (a
	// metrics update).
	OnCall func(service, operation string, code protocol.Code, d time.Duration)
}

// Overflow parks a reply too large for one message for its caller to fetch, or answers
// what the caller should know instead; sessions.OverflowHost implements it. msg is the
// request (its reply subject and headers).
type Overflow interface {
	Reply(ctx context.Context, msg *nats.Msg, data []byte, header nats.Header) error
}

// Errors a run's context is cancelled with; the reply of a call they interrupt names them.
var (
	errStopped       = errors.New("the engine stopped serving")
	errDrainDeadline = errors.New("the drain deadline passed")
)

// Primary serves one kernel service as a NATS micro service. Create it with New; it
// serves once Serve (or the actor's Serve message) has run. Its methods are safe for
// concurrent use.
type Primary struct {
	svc          Service
	cfg          Config
	ops          []string      // sorted operation names
	sem          chan struct{} // one token per running call, shared by every run
	okHeader     nats.Header   // read-only, shared by every success reply
	okHeaderSize int64         // its encoded size, which counts against the max payload

	// mu serializes changes of runs; readers load the slice without it (micro calls the
	// stats handler under its own lock, which Stop takes under mu).
	mu   sync.Mutex
	runs atomic.Pointer[[]*run] // runs not yet known to be finished, oldest first; at most the last accepts

	// Actor state that outlives an actor instance (see actor.go).
	amu      sync.Mutex
	engine   *actor.Engine
	pid      *actor.PID
	outbox   []outMsg
	roleTail chan struct{}  // closed when the last queued role step has finished
	roles    sync.WaitGroup // role steps under way
	confirms sync.WaitGroup // Stop's confirmations that a stopped run has received everything

	replies    replyQueue
	running    atomic.Int64 // calls executing their operation right now
	maxPayload atomic.Int64 // the broker's max payload as last read from the connection
}

// run is one period of serving: from Serve to Stop. Its context is the context of its
// calls; its counter counts them from receipt to reply.
type run struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	ms     micro.Service
	calls  *counter // calls received and not yet answered

	jobs     chan job     // unbuffered: a send succeeds only to an idle worker
	nworkers atomic.Int64 // workers started, at most MaxConcurrent
	workers  *counter     // workers not yet returned; they return once ctx is cancelled

	stopping bool // StopAccepting or Stop has ended its subscriptions; guarded by Primary.mu

	// draining is set by StopAccepting and Stop, which drain the subscriptions; received
	// is closed (allReceived) once every call routed before the confirmed UNSUB has
	// reached the callback, or the confirmation failed.
	draining     atomic.Bool
	received     chan struct{}
	receivedOnce sync.Once
}

// allReceived closes received; safe to call more than once.
func (r *run) allReceived() { r.receivedOnce.Do(func() { close(r.received) }) }

var _ sessions.Host = (*Primary)(nil)

// New checks the configuration and builds a Primary that does not serve yet.
func New(svc Service, cfg Config) (*Primary, error) {
	switch {
	case cfg.Conn == nil:
		return nil, errors.New("primaries: Config.Conn is nil")
	case cfg.InstanceID == "":
		return nil, errors.New("primaries: Config.InstanceID is empty")
	case cfg.MaxConcurrent < 1 || cfg.MaxConcurrent > MaxConcurrentLimit:
		return nil, fmt.Errorf("primaries: Config.MaxConcurrent is %d, want 1..%d", cfg.MaxConcurrent, MaxConcurrentLimit)
	case cfg.LeaseValid == nil:
		return nil, errors.New("primaries: Config.LeaseValid is nil")
	case svc.Name == "":
		return nil, errors.New("primaries: Service.Name is empty")
	case len(svc.Operations) == 0:
		return nil, fmt.Errorf("primaries: service %q has no operations", svc.Name)
	}
	for name, op := range svc.Operations {
		if op == nil {
			return nil, fmt.Errorf("primaries: service %q: operation %q is nil", svc.Name, name)
		}
	}
	svc.Operations = maps.Clone(svc.Operations)
	done := make(chan struct{})
	close(done)
	return &Primary{
		svc:      svc,
		cfg:      cfg,
		ops:      slices.Sorted(maps.Keys(svc.Operations)),
		sem:      make(chan struct{}, cfg.MaxConcurrent),
		okHeader: nats.Header{protocol.HeaderInstance: []string{cfg.InstanceID}},
		// "NATS/1.0\r\n" + "<key>: <value>\r\n" + "\r\n", as nats.go encodes it.
		okHeaderSize: int64(len("NATS/1.0\r\n") + len(protocol.HeaderInstance) + 2 + len(cfg.InstanceID) + 2 + 2),
		roleTail:     done,
	}, nil
}

// Name is the service's wire name.
func (p *Primary) Name() string { return p.svc.Name }

// InFlight is the number of calls received and not yet answered.
func (p *Primary) InFlight() int {
	var n int64
	for _, r := range p.loadRuns() {
		n += r.calls.load()
	}
	return int(n)
}

func (p *Primary) loadRuns() []*run {
	if rs := p.runs.Load(); rs != nil {
		return *rs
	}
	return nil
}

// accepting is the run that takes new calls, or nil. Call with p.mu held.
func (p *Primary) accepting() *run {
	if rs := p.loadRuns(); len(rs) > 0 && !rs[len(rs)-1].stopping {
		return rs[len(rs)-1]
	}
	return nil
}

// Serve adds the micro service and its endpoints and returns once the broker has
// confirmed the subscriptions (a flush round trip). Serving while already serving does
// nothing; serving after Stop starts a new run.
func (p *Primary) Serve(ctx context.Context) error {
	p.maxPayload.Store(p.cfg.Conn.MaxPayload())
	if err := p.subscribe(); err != nil {
		return err
	}
	if err := flush(ctx, p.cfg.Conn); err != nil {
		return fmt.Errorf("primaries: confirm the subscriptions of %q: %w", p.svc.Name, err)
	}
	return nil
}

// subscribe starts a run unless one accepts already.
func (p *Primary) subscribe() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accepting() != nil {
		return nil
	}
	rctx, cancel := context.WithCancelCause(context.Background())
	r := &run{ctx: rctx, cancel: cancel, calls: newCounter(), received: make(chan struct{}),
		jobs: make(chan job), workers: newCounter()}
	ms, err := micro.AddService(p.cfg.Conn, micro.Config{
		Name:         p.svc.Name,
		Version:      protocol.ServiceVersion,
		Description:  p.svc.Description,
		Metadata:     map[string]string{"instance_id": p.cfg.InstanceID},
		StatsHandler: func(*micro.Endpoint) any { return p.stats() },
	})
	if err != nil {
		cancel(err)
		return fmt.Errorf("primaries: add micro service %q: %w", p.svc.Name, err)
	}
	r.ms = ms
	for _, name := range p.ops {
		subject := protocol.ServiceSubject(p.svc.Name, name)
		if err := ms.AddEndpoint(name, p.handler(r, name, p.svc.Operations[name]), micro.WithEndpointSubject(subject)); err != nil {
			_ = ms.Stop()
			cancel(err)
			return fmt.Errorf("primaries: add endpoint %s: %w", subject, err)
		}
	}
	rs := append(slices.Clone(p.loadRuns()), r)
	p.runs.Store(&rs)
	return nil
}

// StopAccepting ends the endpoint subscriptions at the broker and returns once the
// broker has confirmed the UNSUB: micro's Stop drains the subscriptions (queues the
// UNSUB and keeps delivering what was routed before it), then a flush round trip
// proves the broker processed it. Calls already received go on. Not serving: nothing
// to do.
func (p *Primary) StopAccepting(ctx context.Context) error {
	_, err := p.stopAccepting(ctx)
	return err
}

// stopAccepting is StopAccepting; it returns the run it stopped, nil when none accepted.
func (p *Primary) stopAccepting(ctx context.Context) (*run, error) {
	// Draining while the connection reconnects leaves a subscription at the broker that
	// swallows calls (sessions.WaitConnected says how); if ctx ends first, drain anyway.
	_ = sessions.WaitConnected(ctx, p.cfg.Conn)
	p.mu.Lock()
	r := p.accepting()
	if r == nil {
		p.mu.Unlock()
		return nil, nil
	}
	r.stopping = true
	r.draining.Store(true)
	err := r.ms.Stop()
	p.mu.Unlock()
	if err != nil {
		r.allReceived()
		return r, fmt.Errorf("primaries: stop accepting %q: %w", p.svc.Name, err)
	}
	if err := p.confirmReceived(ctx, r); err != nil {
		return r, fmt.Errorf("primaries: confirm that %q stopped accepting: %w", p.svc.Name, err)
	}
	return r, nil
}

// confirmReceived closes r.received once every call the broker routed to r's drained
// subscriptions before their UNSUB has reached the callback: a flush round trip proves
// the broker processed the UNSUB, and after its PONG every such call sits in a
// subscription's pending list. The barrier runs once each has been handed to its
// callback, which counts the call before it returns; from then on the run's counter
// sees every call it will ever get. On an error received is closed at once.
func (p *Primary) confirmReceived(ctx context.Context, r *run) error {
	if err := flush(ctx, p.cfg.Conn); err != nil {
		r.allReceived()
		return err
	}
	if err := p.cfg.Conn.Barrier(r.allReceived); err != nil {
		r.allReceived()
	}
	return nil
}

// SessionsFinished returns nil once every call received has been answered, or ctx's
// error. After StopAccepting this includes calls that were still in the connection's
// pending buffer when the broker confirmed the UNSUB.
func (p *Primary) SessionsFinished(ctx context.Context) error {
	for _, r := range p.loadRuns() {
		if err := r.finished(ctx); err != nil {
			return err
		}
	}
	p.prune()
	return nil
}

func (r *run) finished(ctx context.Context) error {
	if r.draining.Load() {
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

// prune forgets stopped runs that have nothing left in flight and no worker left.
func (p *Primary) prune() {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := slices.DeleteFunc(slices.Clone(p.loadRuns()), func(r *run) bool {
		return r.ctx.Err() != nil && r.calls.load() == 0 && r.workers.load() == 0
	})
	p.runs.Store(&rs)
}

// Stop ends the subscriptions and cancels every running call at once. The
// subscriptions are drained, not dropped: every call the broker routed here before the
// UNSUB is still handed to the callback, which refuses it, like a call waiting for a
// slot: UNAVAILABLE, retryable, as it did not run. So a paused engine that resumes
// answers everything it finds queued, and its callers resend at once instead of
// waiting for their timeout. Stop returns at once; SessionsFinished (and Close) wait
// until those calls are answered, which takes a broker round trip. Safe to call more
// than once.
func (p *Primary) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.loadRuns() {
		r.cancel(errStopped)
		if r.stopping {
			continue // StopAccepting confirms its own drain
		}
		r.stopping = true
		r.draining.Store(true)
		if err := r.ms.Stop(); err != nil { // only fails on a closed connection: nothing left to receive
			r.allReceived()
			continue
		}
		p.confirms.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			defer cancel()
			_ = p.confirmReceived(ctx, r) // a connection that failed the round trip delivers nothing more
		})
	}
}

// Close stops the primary for good: Stop, then it waits until every call has returned
// and every role step of the actor has finished, or ctx ends. The actor itself belongs
// to its spawner, which poisons it.
func (p *Primary) Close(ctx context.Context) error {
	p.Stop()
	if err := p.SessionsFinished(ctx); err != nil {
		return fmt.Errorf("primaries: close %q: %w", p.svc.Name, err)
	}
	done := make(chan struct{})
	go func() {
		p.roles.Wait()
		p.confirms.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("primaries: close %q: role steps still running: %w", p.svc.Name, context.Cause(ctx))
	}
}

// handler is the micro callback of one endpoint. micro runs it for one call at a time,
// so it only counts the call, waits for a slot and hands the call to a worker.
func (p *Primary) handler(r *run, name string, op Operation) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		r.calls.add()
		j := job{name: name, op: op, req: req}
		if p.cfg.OnCall != nil {
			j.received = time.Now()
		}
		select {
		case p.sem <- struct{}{}: // the common case: a slot is free
		default:
			select {
			case p.sem <- struct{}{}:
			case <-r.ctx.Done():
				p.refuse(r, j, false)
				return
			}
		}
		if r.ctx.Err() != nil {
			p.refuse(r, j, true)
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
	received time.Time // set only for Config.OnCall
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
	if !p.cfg.LeaseValid() {
		p.fail(r, j, true, protocol.Refused("this engine has not confirmed its lease within lease/2, so it ran nothing; retry"))
		return
	}
	if r.ctx.Err() != nil {
		p.refuse(r, j, true)
		return
	}
	p.running.Add(1)
	out, err := p.call(r.ctx, j.name, j.op, j.req.Data())
	p.running.Add(-1)
	if err != nil {
		p.fail(r, j, true, wireError(r.ctx, err))
		return
	}
	// The broker's limit is read from the connection (under the lock its flusher holds
	// while writing) only when a reply exceeds the limit last seen.
	if size := int64(len(out)) + p.okHeaderSize; size > p.maxPayload.Load() {
		limit := p.cfg.Conn.MaxPayload()
		p.maxPayload.Store(limit)
		if size > limit {
			p.overflow(r, j, out, size)
			return
		}
	}
	p.observe(j, "")
	p.send(answer{msg: &nats.Msg{Subject: j.req.Reply(), Header: p.okHeader, Data: out}, run: r, slot: true})
}

// observe tells Config.OnCall about an answered call.
func (p *Primary) observe(j job, code protocol.Code) {
	if p.cfg.OnCall != nil {
		p.cfg.OnCall(p.svc.Name, j.name, code, time.Since(j.received))
	}
}

// overflow answers a call whose reply does not fit one message: parked on the overflow
// host, or PAYLOAD_TOO_LARGE. The operation has run either way.
func (p *Primary) overflow(r *run, j job, out []byte, size int64) {
	if p.cfg.Overflow == nil {
		p.fail(r, j, true, protocol.Errorf(protocol.PayloadTooLarge,
			"the reply of %d bytes is above the broker's max payload of %d and this engine parks no replies; "+
				"the operation may already have completed, do not replay it automatically", size, p.cfg.Conn.MaxPayload()))
		return
	}
	// The overflow host publishes on its own connection from this goroutine; micro's
	// Respond is avoided for the reason given at send.
	req := &nats.Msg{Reply: j.req.Reply(), Header: nats.Header(j.req.Headers())}
	_ = p.cfg.Overflow.Reply(r.ctx, req, out, nil) // an error means the caller could not be told; its timeout will
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

// stats is the "data" of every endpoint in $SRV.STATS: micro's own processing time and
// error counts see only the hand-off to a worker, so the primary reports its own.
func (p *Primary) stats() any {
	return map[string]any{"in_flight": p.InFlight(), "max_concurrent_requests": p.cfg.MaxConcurrent}
}

// flush is a broker round trip bounded by ctx, or by flushTimeout when ctx has no
// deadline.
func flush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}
