package sessions

// How the engine serving a call whose request was uploaded (request overflow) reads
// the upload: from its own overflow host through the host actor, or from the engine
// that holds it over the owner-scoped subjects, as the Python engine does (start, then
// reads until done, then close), speaking the Python clients' protobuf messages.

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/internal/clock"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
)

// FetchTimeout bounds each exchange of a fetch from another engine, and is the
// timeout_ms its requests carry, as the Python engine's fetch does.
const FetchTimeout = 10 * time.Second

// pendingPause is how long a fetch waits before asking again for a chunk the upload's
// owner said was pending.
const pendingPause = 20 * time.Millisecond

// forwarded are the request headers a fetch carries to the upload's owner: the token,
// so the owner checks the session is the caller's, and the trace context.
var forwarded = []string{protocol.HeaderAuthToken, "traceparent", "tracestate"}

// ReadRequest returns the bytes of the overflow upload id for a call made by caller
// (its token's sub, "" when the engine verifies no tokens) carrying header, then closes
// the upload. An upload this engine holds is taken from its host at once, after
// checking it is caller's; one held by another engine is fetched from it with the
// caller's token, which that engine checks. Errors are *protocol.Error: NOT_FOUND
// (gone, or its owner is), PERMISSION_DENIED (another caller's), PAYLOAD_TOO_LARGE
// (above the upload limit), DEADLINE_EXCEEDED, or the owner's own code. A refused
// read leaves another caller's upload alone.
//
// The bytes count against this engine's session budget until release is called (once
// the call has run; release is never nil and safe to call more than once): a taken
// upload's, which it held as a session; a fetched one's, taken as they arrive
// (RESOURCE_EXHAUSTED beyond).
func (o *OverflowHost) ReadRequest(ctx context.Context, id, caller string, header nats.Header) (data []byte, release func(), err error) {
	owner, _, err := ParseSessionID(id)
	if err != nil {
		return nil, noRelease, protocol.Errorf(protocol.InvalidArgument, "%s %q is not an overflow upload id: %v", protocol.HeaderOverflowRequest, id, err)
	}
	if owner == o.owner {
		return o.take(ctx, id, caller)
	}
	return o.fetch(ctx, owner, id, caller, header)
}

func noRelease() {}

// take reads an upload of this engine's through the host actor.
func (o *OverflowHost) take(ctx context.Context, id, caller string) ([]byte, func(), error) {
	if o.actorDone.Err() != nil || o.ref.Load() == nil {
		return nil, noRelease, protocol.Refused("the overflow host %s is not running, so the call ran nothing; retry", o.owner)
	}
	// The host actor answers every take, but a call must not outwait a host that is
	// too busy to: the bound is a fetch's.
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	t := &takeUpload{id: id, caller: caller, done: make(chan takeResult, 1)}
	o.tell(t)
	select {
	case r := <-t.done:
		if r.err != nil {
			return nil, noRelease, r.err
		}
		if limit := o.opLimits[protocol.OverflowRequestOperation]; int64(len(r.data)) > limit {
			r.release()
			return nil, noRelease, tooLargeRequest(int64(len(r.data)), limit)
		}
		return r.data, r.release, nil
	case <-o.actorDone.Done():
		t.abandoned.Store(true)
		t.drop()
		return nil, noRelease, protocol.Refused("the overflow host %s stopped, so the call ran nothing; retry", o.owner)
	case <-ctx.Done():
		t.abandoned.Store(true)
		t.drop()
		return nil, noRelease, readTimedOut(ctx.Err())
	}
}

// fetch reads an upload of another engine's: start, reads until done, then close
// whatever happened, each exchange on <prefix>.<owner>.<op> bounded by FetchTimeout.
func (o *OverflowHost) fetch(ctx context.Context, owner, id, caller string, header nats.Header) (_ []byte, _ func(), err error) {
	fwd := nats.Header{}
	for _, k := range forwarded {
		if v := header.Get(k); v != "" {
			fwd.Set(k, v)
		}
	}
	// The close runs even when ctx has ended: an upload left open holds its bytes until
	// it idle-expires.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FetchTimeout)
		defer cancel()
		_ = o.exchange(cctx, owner, protocol.TransferClose, fwd, &transferv1.CloseRequest{Context: fetchContext(), Id: id}, &transferv1.CloseResponse{})
	}()
	// The fetched bytes are this engine's memory now: they take its budget, as the
	// caller's (a client of its own, whatever connection the call came on).
	budget, client := o.cfg.Budget, "overflow fetch for "+caller
	var held int64
	var once sync.Once
	release := func() { once.Do(func() { budget.give(client, held) }) }
	defer func() {
		if err != nil {
			release()
		}
	}()
	if err := o.exchange(ctx, owner, protocol.TransferStart, fwd, &transferv1.StartRequest{Context: fetchContext(), Id: id}, &transferv1.StartResponse{}); err != nil {
		return nil, noRelease, err
	}
	limit := o.opLimits[protocol.OverflowRequestOperation]
	// The pieces are kept as read and joined once at the end: appending would reallocate
	// as the request grows, holding about twice what the budget counts.
	var pieces [][]byte
	var pause clock.Ticker
	defer func() {
		if pause != nil {
			pause.Stop()
		}
	}()
	for seq := uint64(0); ; {
		rep := &transferv1.ReadResponse{}
		if err := o.exchange(ctx, owner, protocol.TransferRead, fwd, &transferv1.ReadRequest{Context: fetchContext(), Id: id, Sequence: seq}, rep); err != nil {
			return nil, noRelease, err
		}
		switch {
		case rep.GetSequence() != seq:
			return nil, noRelease, protocol.Errorf(protocol.Internal, "the owner of overflow upload %s answered read %d with sequence %d", id, seq, rep.GetSequence())
		case rep.GetDone():
			return bytes.Join(pieces, nil), release, nil
		case rep.GetPending():
			if pause == nil {
				pause = o.clock.NewTicker(pendingPause)
			}
			select {
			case <-pause.C():
			case <-ctx.Done():
				return nil, noRelease, readTimedOut(ctx.Err())
			}
			continue
		}
		n := int64(len(rep.GetData()))
		if held+n > limit {
			return nil, noRelease, tooLargeRequest(held+n, limit)
		}
		if err := budget.take(client, n); err != nil {
			// Not retryable as it is: the upload is closed once this fetch ends.
			return nil, noRelease, protocol.Errorf(protocol.ResourceExhausted, "reading the overflowed request: %v", err)
		}
		held += n
		pieces = append(pieces, rep.GetData())
		seq++
	}
}

// errorHolder is every transfer response message: its error is field 15.
type errorHolder interface {
	proto.Message
	GetError() *commonv1.CallError
}

// exchange sends req to the upload's owner and decodes its answer into rep; an error
// the owner answered becomes a *protocol.Error with its code.
func (o *OverflowHost) exchange(ctx context.Context, owner, op string, header nats.Header, req proto.Message, rep errorHolder) error {
	body, err := proto.Marshal(req)
	if err != nil {
		return protocol.Errorf(protocol.Internal, "encode the overflow %s request: %v", op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	m, err := o.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: OwnerSubject(o.prefix, owner, op), Header: header, Data: body})
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return protocol.Errorf(protocol.NotFound, "The overflow upload's owner is gone (engine %s does not answer on %s)", owner, o.prefix)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, nats.ErrTimeout):
		return readTimedOut(err)
	case err != nil:
		return protocol.Errorf(protocol.Unavailable, "reading the overflowed request from engine %s: %v", owner, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		// A host answering in micro's error headers, not the protobuf message.
		c := protocol.Code(m.Header.Get(protocol.HeaderErrorCode))
		if c == "" {
			c = protocol.Internal
		}
		return protocol.Errorf(c, "the owner of the overflow upload refused %s: %s", op, m.Header.Get(micro.ErrorHeader))
	}
	if err := proto.Unmarshal(m.Data, rep); err != nil {
		return protocol.Errorf(protocol.Internal, "the owner of the overflow upload answered %s with an undecodable message: %v", op, err)
	}
	if e := rep.GetError(); e != nil && e.GetCode() != "" {
		return &protocol.Error{Code: protocol.Code(e.GetCode()), Message: e.GetMessage(), Retryable: e.GetRetryable()}
	}
	return nil
}

func fetchContext() *commonv1.CallContext {
	return &commonv1.CallContext{TimeoutMs: int32(FetchTimeout / time.Millisecond)}
}

func tooLargeRequest(n, limit int64) error {
	return protocol.Errorf(protocol.PayloadTooLarge, "Request exceeds the overflow value limit: %d bytes or more, the limit being %d", n, limit)
}

func readTimedOut(cause error) error {
	if errors.Is(cause, context.Canceled) {
		// The engine stopped (a handover, a shutdown): nothing timed out and nothing
		// ran, but the upload is closed once the read ends, so a plain resend would
		// find it gone.
		return protocol.Errorf(protocol.Unavailable, "the engine stopped while it read the overflowed request, so it ran nothing; upload the request again (%v)", cause)
	}
	return protocol.Errorf(protocol.DeadlineExceeded, "Reading the overflowed request timed out (%v)", cause)
}
