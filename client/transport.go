package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/abi-engine/engine/internal/bufpool"
	"github.com/abi-engine/engine/protocol"
)

// DefaultTimeout bounds a call whose context has no deadline, like the engine's
// nats.client_timeout_seconds default.
const DefaultTimeout = 10 * time.Second

// conn is what a Transport needs of a NATS connection; *nats.Conn has it.
type conn interface {
	RequestMsgWithContext(ctx context.Context, msg *nats.Msg) (*nats.Msg, error)
	RequestMsg(msg *nats.Msg, timeout time.Duration) (*nats.Msg, error)
	RequestWithContext(ctx context.Context, subject string, data []byte) (*nats.Msg, error)
	Request(subject string, data []byte, timeout time.Duration) (*nats.Msg, error)
	MaxPayload() int64
}

// Transport sends requests to the kernel services and hides a handover from its caller:
// a call that reached nobody (no responders, or a fenced engine that ran nothing) is
// resent, with backoff, until the next engine answers or the retry window ends. It is
// safe for concurrent use and starts no goroutines; the caller owns the connection.
type Transport struct {
	conn     conn
	policy   RetryPolicy
	timeout  time.Duration
	counters *Counters
	// maxTransfer bounds a transfer and a parked reply (WithMaxTransferBytes).
	maxTransfer int64
	tracer      trace.Tracer // WithTracerProvider (trace.go); nil: none
	// overflow is the header of the typed calls whose replies may be parked
	// (overflowHeader, overflowFor), made once: nothing writes to a request's headers (a
	// trace is injected into a copy).
	overflow nats.Header
	// bodies holds the typed calls' request buffers for reuse, so a busy client
	// allocates none (TestConcurrentCallsShareNoRequestBuffer).
	bodies *bufpool.Pool
	// tokens, set by WithServiceToken, adds a service token to every request; nil:
	// none, and a request's headers go out as they are.
	tokens *tokenSource
}

// Option configures a Transport.
type Option func(*Transport)

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option { return func(t *Transport) { t.policy = p } }

// WithCounters makes the transport count into c, so several transports can share the
// counters the engine's metrics read.
func WithCounters(c *Counters) Option { return func(t *Transport) { t.counters = c } }

// WithDefaultTimeout bounds calls whose context has no deadline (DefaultTimeout if not
// given).
func WithDefaultTimeout(d time.Duration) Option { return func(t *Transport) { t.timeout = d } }

// NewTransport returns a Transport over nc.
func NewTransport(nc *nats.Conn, opts ...Option) (*Transport, error) {
	if nc == nil {
		return nil, errors.New("client: NewTransport needs a NATS connection, got nil")
	}
	return newTransport(nc, opts...)
}

func newTransport(c conn, opts ...Option) (*Transport, error) {
	t := &Transport{conn: c, policy: DefaultRetryPolicy(), timeout: DefaultTimeout, maxTransfer: DefaultMaxTransferBytes,
		overflow: overflowHeader(), bodies: &bufpool.Pool{Size: requestSize, Max: maxPooledBody}}
	for _, opt := range opts {
		opt(t)
	}
	if err := t.policy.Validate(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if t.timeout <= 0 {
		return nil, fmt.Errorf("client: default timeout %s must be positive", t.timeout)
	}
	if t.maxTransfer <= 0 {
		return nil, fmt.Errorf("client: max transfer bytes %d must be positive", t.maxTransfer)
	}
	if t.tokens != nil {
		if err := t.tokens.check(); err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
	}
	if t.counters == nil {
		t.counters = NewCounters()
	}
	return t, nil
}

// Counters are the transport's counters.
func (t *Transport) Counters() *Counters { return t.counters }

// Policy is the transport's retry policy.
func (t *Transport) Policy() RetryPolicy { return t.policy }

// MaxPayload is the largest message the broker accepts (body and headers), 0 while
// unknown (never connected). A request larger than this needs a transfer.
func (t *Transport) MaxPayload() int64 { return t.conn.MaxPayload() }

// Reply is a successful reply.
type Reply struct {
	// Data is the reply's body; for a parked reply, the body fetched from the engine.
	Data []byte
	// Header is the reply's headers; a parked reply's are those of its announcement,
	// without Abi-Overflow-Reply and Abi-Overflow-Size.
	Header nats.Header
	// Instance is the engine instance that answered (header Abi-Engine-Instance).
	Instance string
}

// Request sends payload with headers to subject and waits for the reply until ctx ends
// (or DefaultTimeout when ctx has no deadline).
//
// On subjects that Retryable accepts, a call that reached nobody is resent within the
// policy's window, which ends the policy's margin before the deadline, so the caller
// sees "no responders" rather than a timeout. Other subjects fail at once. Every error is
// a *CallError (see there for matching); an engine's error reply is never resent unless
// it is UNAVAILABLE with retryable true, which means the call changed nothing (a fenced
// engine that ran nothing, a write the backend refused). An UNAVAILABLE without it may
// hide a write that took effect, and is returned as it is.
//
// A request whose headers carry protocol.HeaderOverflow "1" says the caller can take a
// reply larger than one message: when the engine parks such a reply and answers with a
// protocol.OverflowEnvelope, Request reads the parked body from the engine that holds it
// (owner-scoped calls, never resent), checks its size, closes the parked session and
// returns the body as if it had come in one message. A failure while fetching it is not
// retryable: the operation has run. Without the header, an engine answers a reply that
// large with PAYLOAD_TOO_LARGE.
func (t *Transport) Request(ctx context.Context, subject string, payload []byte, headers nats.Header) (*Reply, error) {
	r, err := asReply(t.roundTrip(ctx, subject, payload, headers, false))
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Call sends body, the JSON request of service's operation op, as the typed clients
// send theirs, and returns the reply as Request does (a value, as a caller on a hot
// path keeps it no longer than the call). It asks for a parked reply where
// one may be needed (protocol.ReplyMayOverflow): a keyvalue get, whose reply almost
// always fits one message, goes out without the overflow header and is sent once more
// with it when the engine answers PAYLOAD_TOO_LARGE (a get only reads, so reading again
// is safe; the header costs every call that carries it about a tenth of a round trip's
// CPU); every other such operation carries the header from the start.
func (t *Transport) Call(ctx context.Context, service, op string, body []byte) (Reply, error) {
	header, onDemand := t.overflowFor(service, op)
	return asReply(t.roundTrip(ctx, protocol.ServiceSubject(service, op), body, header, onDemand))
}

func asReply(m *nats.Msg, ce *CallError) (Reply, error) {
	if ce != nil {
		return Reply{}, ce
	}
	return Reply{Data: m.Data, Header: m.Header, Instance: m.Header.Get(protocol.HeaderInstance)}, nil
}

// roundTrip is Request with the reply's message: the call counted, bounded and traced.
// onDemand resends, once, a request without the overflow header with it when the
// engine answers PAYLOAD_TOO_LARGE (overflowFor).
func (t *Transport) roundTrip(ctx context.Context, subject string, payload []byte, headers nats.Header, onDemand bool) (*nats.Msg, *CallError) {
	t.counters.calls.Add(1)
	ctx, cancel := t.bound(ctx)
	defer cancel()
	ctx, headers, traced := t.trace(ctx, subject, headers)
	m, ce := t.request(ctx, subject, payload, headers, onDemand)
	if ce != nil {
		traced("", ce)
		t.counters.fail(ce.Err.Code)
		return nil, ce
	}
	traced(m.Header.Get(protocol.HeaderInstance), nil)
	return m, nil
}

// request is Request's retry loop; it returns the reply message (of the parked reply,
// when there was one).
func (t *Transport) request(ctx context.Context, subject string, payload []byte, headers nats.Header, onDemand bool) (*nats.Msg, *CallError) {
	start := time.Now()
	var window time.Duration
	if Retryable(subject) {
		deadline, _ := ctx.Deadline() // bound set one
		window = t.policy.WindowFor(deadline.Sub(start))
	}
	giveUp := start.Add(window)
	now := start
	for retry := 0; ; retry++ {
		m, err := t.attempt(ctx, subject, payload, headers, now)
		t.counters.sawNoResponders(err)
		var ce *CallError
		switch {
		case err != nil:
			ce = transportError(subject, err, window > 0, window.String())
		case acceptsOverflow(headers):
			// A parked reply is fetched before anything else looks at it; its operation
			// has run, so a failure to fetch it is never resent.
			if m, ce = t.unparkBounded(ctx, subject, m); ce != nil {
				return nil, ce
			}
		}
		if ce == nil {
			if !isErrorReply(m) {
				return m, nil
			}
			ce = &CallError{Subject: subject, Instance: m.Header.Get(protocol.HeaderInstance), Err: decodeErrorReply(m)}
			if onDemand && ce.Err.Code == protocol.PayloadTooLarge && !acceptsOverflow(headers) {
				// The engine read a reply too large for one message and could not park
				// it for a request without the header: read it again, able to take it
				// parked. At once: this is not a retry, the engine is there.
				headers = withOverflow(headers, t.overflow)
				t.counters.resends.Add(1)
				now = time.Now()
				continue
			}
		}
		if window == 0 || !nobodyRan(ce) {
			return nil, ce
		}
		left := time.Until(giveUp)
		if left <= 0 {
			t.counters.giveUps.Add(1)
			return nil, ce
		}
		// The last pause is cut short so one final attempt lands at the end of the window.
		if err := pause(ctx, min(t.policy.Delay(retry), left)); err != nil {
			return nil, transportError(subject, err, false, "")
		}
		t.counters.retries.Add(1)
		now = time.Now()
	}
}

// nobodyRan reports whether the call certainly did not run: the broker found no
// subscriber, or the engine says it changed nothing (UNAVAILABLE with retryable true,
// docs/design.md §5.8: refused before it ran, or not applied by the backend).
func nobodyRan(ce *CallError) bool {
	if ce.Cause != nil {
		return errors.Is(ce.Cause, nats.ErrNoResponders)
	}
	return ce.Err.Code == protocol.Unavailable && ce.Err.Retryable
}

func pause(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// bound gives ctx the default deadline when it has none. A ctx that can never end
// (context.Background and the like) gets the deadline alone, not context.WithTimeout's
// context and timer: each attempt is then bounded by the time left (attempt), which on
// a busy client saves a few per cent of its CPU.
func (t *Transport) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	if ctx.Done() == nil {
		return deadlineOnly{Context: ctx, deadline: time.Now().Add(t.timeout)}, func() {}
	}
	return context.WithTimeout(ctx, t.timeout)
}

// deadlineOnly is a context that never ends and carries a deadline (bound). Nothing
// waits on it: attempt bounds the request by the deadline, pause by the retry window,
// and a parked reply is fetched under a context of its own (unparkBounded).
type deadlineOnly struct {
	context.Context
	deadline time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.deadline, true }

// attempt sends one request: bounded by ctx, or for a ctx that never ends, by its
// deadline as seen at now (the caller's latest clock reading), with the error a context
// would have given when it passes. A request without headers goes out without a
// nats.Msg, which would be one more allocation per call.
func (t *Transport) attempt(ctx context.Context, subject string, payload []byte, headers nats.Header, now time.Time) (*nats.Msg, error) {
	if t.tokens != nil {
		var err error
		if headers, err = t.withToken(headers, now); err != nil {
			return nil, err
		}
	}
	if ctx.Done() != nil {
		if headers == nil {
			return t.conn.RequestWithContext(ctx, subject, payload)
		}
		return t.conn.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: payload, Header: headers})
	}
	deadline, _ := ctx.Deadline() // bound set one
	left := deadline.Sub(now)
	if left <= 0 {
		return nil, context.DeadlineExceeded
	}
	var m *nats.Msg
	var err error
	if headers == nil {
		m, err = t.conn.Request(subject, payload, left)
	} else {
		m, err = t.conn.RequestMsg(&nats.Msg{Subject: subject, Data: payload, Header: headers}, left)
	}
	if errors.Is(err, nats.ErrTimeout) {
		err = context.DeadlineExceeded
	}
	return m, err
}

// unparkBounded is unpark under a context that ends at ctx's deadline: fetching a
// parked reply waits on its context.
func (t *Transport) unparkBounded(ctx context.Context, subject string, m *nats.Msg) (*nats.Msg, *CallError) {
	ref, ok, perr := parkedRef(m)
	if !ok {
		return m, nil // an ordinary reply: no context to make
	}
	if ctx.Done() == nil {
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	return t.unpark(ctx, subject, m, ref, perr)
}

// requestContext is the "context" member of a request: the time left until ctx's
// deadline, so the engine stops working on a call its caller no longer waits for.
func requestContext(ctx context.Context) *protocol.RequestContext {
	rc := contextMember(ctx)
	return protocol.CtxOf(&rc).Context
}

// contextMember is requestContext as a value (zero: none), for a request encoded at
// once (protocol.CtxOf), which then needs no allocation for it.
func contextMember(ctx context.Context) protocol.RequestContext {
	deadline, ok := ctx.Deadline()
	if !ok {
		return protocol.RequestContext{}
	}
	return protocol.RequestContext{TimeoutMS: max(1, time.Until(deadline).Milliseconds())}
}

// requestBuilder appends a request body to b, with rc as its context member
// (protocol.CtxOf(&rc)): the typed calls append their request without reflection,
// and with rc and the request on their stacks. The body it returns (b grown, or new
// memory) is the transport's to reuse once the call returns, so it must not share
// memory with anything else, a caller's value above all.
type requestBuilder func(b []byte, rc protocol.RequestContext) ([]byte, error)

// call sends the JSON request that build makes to service.operation and decodes the
// reply into out (nil: ignore the body).
func (t *Transport) call(ctx context.Context, service, op string, build requestBuilder, out any) error {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	subject := protocol.ServiceSubject(service, op)
	buf := t.bodies.Get()
	body, err := build(*buf, contextMember(ctx))
	if err != nil {
		t.counters.calls.Add(1)
		return t.failed(&CallError{Subject: subject, Err: protocol.Errorf(protocol.InvalidArgument, "encode request: %v", err), Cause: err})
	}
	header, onDemand := t.overflowFor(service, op)
	err = t.send(ctx, subject, body, header, onDemand, out)
	t.bodies.Put(buf, body)
	return err
}

// maxPooledBody is the largest request buffer kept for reuse; a large write's is left
// to the collector.
const maxPooledBody = 4 << 10

// overflowFor is how a typed call of service.op asks for a reply too large for one
// message (protocol.ReplyMayOverflow), so that a reply of any size arrives: with the
// overflow header from the start, or (onDemand) without it until the engine answers
// PAYLOAD_TOO_LARGE. On demand is for keyvalue get alone: the SDK's hottest call, a
// read (so the engine may run it twice), and one whose reply is a single value that
// rarely outgrows a message; get_object and list_objects answer objects and listings,
// which often do. Operations whose replies always fit carry no header.
func (t *Transport) overflowFor(service, op string) (header nats.Header, onDemand bool) {
	switch {
	case service == protocol.KeyValue && op == protocol.OpGet:
		return nil, true
	case protocol.ReplyMayOverflow(service, op):
		return t.overflow, false
	}
	return nil, false
}

// withOverflow is headers with the overflow header added: overflow itself for none, a
// copy otherwise (a caller's headers are never written to).
func withOverflow(headers, overflow nats.Header) nats.Header {
	if len(headers) == 0 {
		return overflow
	}
	h := maps.Clone(headers)
	h[protocol.HeaderOverflow] = overflow[protocol.HeaderOverflow]
	return h
}

// requestSize is the first capacity of a typed call's request body: most fit.
const requestSize = 128

// send is the second half of call, for callers that checked the encoded body first;
// header and onDemand are overflowFor's.
func (t *Transport) send(ctx context.Context, subject string, body []byte, header nats.Header, onDemand bool, out any) error {
	reply, ce := t.roundTrip(ctx, subject, body, header, onDemand)
	if ce != nil {
		return ce
	}
	if out == nil {
		return nil
	}
	if err := protocol.DecodeReply(reply.Data, out); err != nil {
		return t.failed(&CallError{
			Subject:  subject,
			Instance: reply.Header.Get(protocol.HeaderInstance),
			Err:      protocol.Errorf(protocol.Internal, "decode reply %.64q: %v", reply.Data, err),
			Cause:    err,
		})
	}
	return nil
}

// failed counts a failure found after the transport's own part of the call.
func (t *Transport) failed(ce *CallError) error {
	t.counters.fail(ce.Err.Code)
	return ce
}

// overflowHeader is the header of a request whose caller can take a parked reply; a
// fresh map per call, as headers are mutable.
func overflowHeader() nats.Header {
	return nats.Header{protocol.HeaderOverflow: []string{"1"}}
}
