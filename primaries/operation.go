package primaries

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// Operation runs one call of one endpoint: data is the request body, the result the
// reply body. ctx is cancelled when the primary stops or its drain deadline passes.
// An error is answered with the envelope of docs/design.md §4.3: a *protocol.Error keeps its
// code, anything else becomes INTERNAL (context errors are mapped, see Primary).
type Operation func(ctx context.Context, data []byte) ([]byte, error)

// Service is a kernel service as a Primary serves it: its wire name (the micro service
// name and the <service> of abi.svc.<service>.v1.<operation>) and one Operation per
// endpoint.
type Service struct {
	Name        string
	Description string
	Operations  map[string]Operation
	// Inline says no operation of the service ever waits for I/O (a backend in this
	// process's memory): the Primary then runs each call on micro's callback, one at a
	// time per endpoint as micro delivers them, instead of handing it to a worker, which
	// saves two goroutine switches per call. The slot, the lease check, the call count
	// and the error envelope are the same either way. Leave it false for a backend that
	// does I/O: one slow call would hold up every later call of its endpoint. An inline
	// operation keeps nothing of its call (the request, its context) once it returns:
	// Handle reuses the call's frame.
	Inline bool
	// Protobuf, optional, is the protobuf protocol of operations (by the names of
	// Operations): a call of such an operation whose body is not JSON (protocol.IsJSON)
	// runs its ProtoOperation and is answered in protobuf. Operations without one
	// speak JSON only.
	Protobuf map[string]ProtoOperation
	// Reserves names the operations whose calls reserve the memory they will hold
	// before they read it (MemoryOf, CallMemory.Reserve): those whose reply may be too
	// large for one message.
	Reserves []string
}

// ctxType is the type a request body embeds for its "context" member.
var ctxType = reflect.TypeFor[protocol.Ctx]()

// ctxMemberName is the JSON name of a request's context member.
const ctxMemberName = "context"

// Handle makes an Operation of a typed function. The body is decoded as JSON into a
// Req; a positive context.timeout_ms bounds ctx; the result is encoded as JSON.
// Decoding is strict (see Decode), and its failures are INVALID_ARGUMENT errors that
// say what was wrong. A Req that embeds protocol.Ctx has the "context" member in it
// (the handler reads the trace id there); a struct Req that does not, and has no
// member "context" of its own, has the member read beside it, so its timeout_ms bounds
// the call all the same. A Req with a fast path (protocol's request types: DecodeFast)
// takes it when the body has the exact shape it reads, and a Rep that appends itself
// (AppendJSON, writing what encoding/json would) is not encoded by reflection.
func Handle[Req, Rep any](run func(ctx context.Context, req *Req) (Rep, error)) Operation {
	t := reflect.TypeFor[Req]()
	s := schemaOf(t)
	var index []int // of the embedded protocol.Ctx, nil for none
	if t.Kind() == reflect.Struct {
		if f, ok := t.FieldByName("Ctx"); ok && f.Anonymous && f.Type == ctxType {
			index = f.Index
		}
	}
	// beside: the "context" member is decoded on its own, into the frame's spare Ctx.
	var beside *schema
	if index == nil && t.Kind() == reflect.Struct && s.members[ctxMemberName] == nil {
		beside = schemaOf(ctxType)
	}
	_, fast := any(new(Req)).(fastDecoder)
	_, appends := any(new(Rep)).(appender)
	// A call's request, reply, context member and inline deadline share one
	// allocation, and the reply is handed to its appender by pointer, so none of them
	// is allocated on its own.
	type frame struct {
		req     Req
		rep     Rep
		rc      protocol.RequestContext // the context member, on the fast path
		side    protocol.Ctx            // the context member of a Req without Ctx
		bounded boundedInline
	}
	// An inline call's frame is reused once the call has returned (Service.Inline: its
	// operation keeps nothing of the call), one allocation less on the engine's busiest
	// path. A pooled call's frame is its own: a backend doing I/O may still be working
	// on its request after the call timed out.
	var frames sync.Pool // of *frame
	return func(ctx context.Context, data []byte) ([]byte, error) {
		inline, isInline := ctx.(inlineCtx)
		var f *frame
		if isInline {
			if f, _ = frames.Get().(*frame); f != nil {
				*f = frame{}
			} else {
				f = new(frame)
			}
			defer frames.Put(f)
		} else {
			f = new(frame)
		}
		req := &f.req
		var rc *protocol.Ctx
		if c, ok := any(req).(ctxHolder); ok {
			rc = c.RequestCtx()
		} else if index != nil {
			rc = reflect.ValueOf(req).Elem().FieldByIndex(index).Addr().Interface().(*protocol.Ctx)
		} else {
			rc = &f.side // stays empty unless beside reads it
		}
		if fast {
			rc.Context = &f.rc // the spare DecodeFast fills; it leaves nil without the member
		}
		if !fast || !any(req).(fastDecoder).DecodeFast(data) {
			if err := decodeWith(data, req, s); err != nil {
				return nil, err
			}
		}
		if beside != nil {
			if err := decodeWith(data, rc, beside); err != nil {
				return nil, err
			}
		}
		if c := rc.Context; c != nil && c.TimeoutMS != 0 {
			timeout, err := callTimeout(c.TimeoutMS)
			if err != nil {
				return nil, err
			}
			if isInline {
				f.bounded = boundedInline{Context: ctx, deadline: time.Now().Add(timeout)}
				ctx = &f.bounded
			} else {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
		}
		var err error
		if f.rep, err = run(ctx, req); err != nil {
			return nil, err
		}
		if appends {
			return inline.scratch.appendReply(any(&f.rep).(appender)), nil
		}
		out, err := json.Marshal(f.rep)
		if err != nil {
			return nil, protocol.Errorf(protocol.Internal, "encode the reply: %v", err)
		}
		return out, nil
	}
}

// inlineCtx is the context of a call that runs on micro's callback (Service.Inline),
// which never waits; scratch is its endpoint's reply buffer.
type inlineCtx struct {
	context.Context
	scratch *replyScratch
	mem     *CallMemory // the call's, for an operation that reserves (Service.Reserves)
}

// Value answers MemoryOf for the inline call that carries a CallMemory.
func (c inlineCtx) Value(key any) any {
	if _, ok := key.(memoryKey); ok && c.mem != nil {
		return c.mem
	}
	return c.Context.Value(key)
}

// boundedInline is context.WithTimeout for an inline call: the call never waits, so
// nothing needs Done to fire at the deadline, and it is enough that Deadline reports it
// and Err tells it has passed. It saves WithTimeout's timer and its registration with
// the run's context, a quarter of an inline call's own CPU.
type boundedInline struct {
	context.Context
	deadline time.Time
}

func (c *boundedInline) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *boundedInline) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// replySize is the first capacity of an appended reply: most replies fit.
const replySize = 128

// appender is a reply type that writes its own JSON (protocol's reply types).
type appender interface{ AppendJSON(b []byte) []byte }

// ctxHolder is a request that hands out its Ctx (every type embedding protocol.Ctx).
type ctxHolder interface{ RequestCtx() *protocol.Ctx }

// maxTimeoutMS is the largest context.timeout_ms a time.Duration holds (about 292
// years); a larger one would wrap around into a deadline already passed.
const maxTimeoutMS = math.MaxInt64 / int64(time.Millisecond)

// callTimeout is the bound a request's context.timeout_ms sets.
func callTimeout(ms int64) (time.Duration, error) {
	switch {
	case ms < 0:
		return 0, protocol.Errorf(protocol.InvalidArgument, "context.timeout_ms must not be negative, got %d", ms)
	case ms > maxTimeoutMS:
		return 0, protocol.Errorf(protocol.InvalidArgument, "context.timeout_ms %d is too large, the limit is %d", ms, maxTimeoutMS)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ReadOnly marks op as an operation that changes nothing (a read). When the engine
// stops it while it runs (a fence, the drain deadline), nothing it did can have taken
// effect, so it is answered UNAVAILABLE retryable, and the SDK sends it again to the
// engine that serves, instead of "it may have taken effect". Mark only what never
// writes: a call marked read-only that writes could be run twice.
func ReadOnly(op Operation) Operation {
	return func(ctx context.Context, data []byte) ([]byte, error) {
		out, err := op(ctx, data)
		if err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return nil, protocol.Refused("%v before the read returned; a read changes nothing, so resend it", context.Cause(ctx))
		}
		return out, err
	}
}
