package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/protocol"
)

// DefaultParkTimeout bounds how long Reply waits for the host actor to park a reply
// when its context has no deadline.
const DefaultParkTimeout = 5 * time.Second

// OverflowConfig configures an OverflowHost. Zero values take the TransferHost
// defaults.
type OverflowConfig struct {
	// Owner is the engine's instance id; empty takes NewOwnerID().
	Owner string
	// MaxSessions bounds the parked replies at once.
	MaxSessions int
	// MaxReplyBytes is the largest reply that is parked; a larger one is answered
	// PAYLOAD_TOO_LARGE.
	MaxReplyBytes int64
	// MaxRequestBytes bounds one overflow upload (a request too large for one
	// message); 0 is protocol.DefaultMaxOverflowRequestBytes. The budget bounds what
	// every upload and parked reply hold together.
	MaxRequestBytes int64
	// MaxSessionsPerClient bounds the parked replies of one client.
	MaxSessionsPerClient int
	// Budget is TransferConfig.Budget: the engine shares one between its hosts.
	Budget *Budget
	// MaxBufferedBytes bounds all parked replies together when Budget is nil.
	MaxBufferedBytes int64
	// IdleTimeout closes a parked reply nobody reads.
	IdleTimeout time.Duration
	// MaxLifetime closes a parked reply that long after it was parked.
	MaxLifetime time.Duration
	// Limits, when set, win over the fields above (the engine's limits block).
	Limits Limits
	// LeaseValid is TransferConfig.LeaseValid: reads of a parked reply run only while
	// the engine's lease is confirmed. Required.
	LeaseValid func() bool
	Clock      clock.Clock
	// Logger receives what the host logs; nil discards.
	Logger *zap.Logger
	// Tokens and OnNoTokens are TransferConfig's: with Tokens, a parked reply belongs
	// to the `sub` of its request's token, and every read and close must carry a
	// token of the same caller.
	Tokens     TokenVerifier
	OnNoTokens func()
}

// OverflowHost parks replies too large for one NATS message (as the Python engine parks them), and
// holds requests too large for one (upload.go, fetch.go). It is a TransferHost on
// protocol.OverflowPrefix: each parked reply is a session created by the engine, a
// download that is already started, which its caller reads and closes on the
// owner-scoped subjects; each upload is a session a client opens with operation
// protocol.OverflowRequestOperation and writes, which the engine serving its call takes
// or fetches. It is a Host like any other, and the reason WaitForSessions runs two
// rounds.
//
// One OverflowHost serves every ServicePrimary of an engine. Spawn it and Serve it like
// a TransferHost.
type OverflowHost struct {
	*TransferHost
}

// NewOverflowHost builds the overflow host on nc.
func NewOverflowHost(nc *nats.Conn, cfg OverflowConfig) (*OverflowHost, error) {
	tc := TransferConfig{
		Prefix:               protocol.OverflowPrefix,
		Owner:                cfg.Owner,
		Handlers:             map[string]Handler{protocol.OverflowRequestOperation: uploadHandler},
		MaxSessions:          cfg.MaxSessions,
		MaxSessionsPerClient: cfg.MaxSessionsPerClient,
		MaxSessionBytes:      cfg.MaxReplyBytes,
		Budget:               cfg.Budget,
		MaxBufferedBytes:     cfg.MaxBufferedBytes,
		IdleTimeout:          cfg.IdleTimeout,
		MaxLifetime:          cfg.MaxLifetime,
		LeaseValid:           cfg.LeaseValid,
		Clock:                cfg.Clock,
		Logger:               cfg.Logger,
		Tokens:               cfg.Tokens,
		OnNoTokens:           cfg.OnNoTokens,
	}
	cfg.Limits.Apply(&tc)
	maxRequest := or(or(cfg.Limits.MaxRequestBytes, cfg.MaxRequestBytes), protocol.DefaultMaxOverflowRequestBytes)
	if maxRequest < 0 {
		return nil, fmt.Errorf("overflow host: max request bytes %d is negative", maxRequest)
	}
	h, err := NewTransferHost(nc, tc)
	if err != nil {
		return nil, err
	}
	h.opLimits = map[string]int64{protocol.OverflowRequestOperation: maxRequest}
	return &OverflowHost{TransferHost: h}, nil
}

// Reply answers the request msg with data and header (plus the Abi-Engine-Instance
// header), whatever data's size:
//
//   - a reply that fits the broker's max payload (body and headers) is sent as it is;
//   - a larger one, when the request carried protocol.HeaderOverflow "1", is parked as a
//     read-only session and the caller gets a protocol.OverflowEnvelope telling it where
//     to read it;
//   - otherwise, or when it cannot be parked (above MaxReplyBytes: PAYLOAD_TOO_LARGE;
//     no capacity left or the host not serving: RESOURCE_EXHAUSTED), the caller gets that
//     error. The operation has run by then, so none of these is retryable.
//
// ctx bounds the parking (DefaultParkTimeout when it has no deadline). The error is
// about sending: nil means the caller was sent one of the three answers. The reply goes
// out on the connection msg arrived on (the host's own when msg is not bound to one).
// A parked reply keeps data: do not modify it afterwards. A parked reply counts as a
// call in flight until its notice is sent, and as a session until its caller closes it
// or it idle-expires.
func (o *OverflowHost) Reply(ctx context.Context, msg *nats.Msg, data []byte, header nats.Header) error {
	return o.ReplyHeld(ctx, msg, data, header, nil)
}

// ReplyHeld is Reply for a call that reserved its reply's bytes ahead (Reserve): a
// parked reply takes held over, keeping what it holds and giving the rest back. held
// is the caller's to Release once ReplyHeld has returned, whatever happened: after a
// park that is a no-op.
func (o *OverflowHost) ReplyHeld(ctx context.Context, msg *nats.Msg, data []byte, header nats.Header, held *Reservation) error {
	return o.reply(ctx, jsonReply, msg.Header, ClientOf(msg.Reply), o.sender(msg), data, header, held)
}

// sender publishes a reply to msg, on the connection msg arrived on (the host's own
// when msg is not bound to one).
func (o *OverflowHost) sender(msg *nats.Msg) func(*nats.Msg) error {
	return func(m *nats.Msg) error {
		if msg.Sub != nil {
			return msg.RespondMsg(m)
		}
		if msg.Reply == "" {
			return nats.ErrMsgNoReply
		}
		m.Subject = msg.Reply
		return o.nc.PublishMsg(m)
	}
}

// ReplyProtobuf is Reply for a protobuf call (the Python clients'), as the Python
// engine answers one: data is the serialized response message; a parked reply's
// notice has an empty body and exactly the headers Abi-Overflow-Reply and
// Abi-Overflow-Size (plus Abi-Engine-Instance), and its reads speak protobuf; an
// error is the operation's response message that fail makes (the error in it), with
// Abi-Error-Code and never micro's error headers.
func (o *OverflowHost) ReplyProtobuf(ctx context.Context, msg *nats.Msg, data []byte, fail func(*protocol.Error) []byte) error {
	return o.ReplyProtobufHeld(ctx, msg, data, fail, nil)
}

// ReplyProtobufHeld is ReplyProtobuf for a call that reserved its reply's bytes ahead,
// as ReplyHeld.
func (o *OverflowHost) ReplyProtobufHeld(ctx context.Context, msg *nats.Msg, data []byte, fail func(*protocol.Error) []byte, held *Reservation) error {
	return o.reply(ctx, protoReplyCodec{fail: fail}, msg.Header, ClientOf(msg.Reply), o.sender(msg), data, nil, held)
}

// replyCodec is how the overflow host answers in one codec: errors, and the notice of
// a parked reply.
type replyCodec interface {
	codec() protocol.Codec
	errorMsg(owner string, err error) *nats.Msg
	notice(owner string, ref *protocol.OverflowRef, header nats.Header) (*nats.Msg, error)
}

// jsonReply answers in the JSON protocol: an error envelope, and an OverflowEnvelope
// beside the two headers.
var jsonReply replyCodec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) codec() protocol.Codec                      { return protocol.JSON }
func (jsonCodec) errorMsg(owner string, err error) *nats.Msg { return errorMsg(owner, err) }
func (jsonCodec) notice(owner string, ref *protocol.OverflowRef, header nats.Header) (*nats.Msg, error) {
	body, err := json.Marshal(protocol.OverflowEnvelope{Overflow: ref})
	if err != nil {
		return nil, fmt.Errorf("encode overflow envelope: %w", err)
	}
	return replyMsg(owner, body, header), nil
}

// protoReplyCodec answers in protobuf: the operation's response carrying the error,
// and an empty notice (the Python engine's, which its clients and tests expect).
type protoReplyCodec struct{ fail func(*protocol.Error) []byte }

func (protoReplyCodec) codec() protocol.Codec { return protocol.Protobuf }
func (c protoReplyCodec) errorMsg(owner string, err error) *nats.Msg {
	return protoErrorBody(owner, wireError(err), c.fail)
}
func (protoReplyCodec) notice(owner string, _ *protocol.OverflowRef, header nats.Header) (*nats.Msg, error) {
	return replyMsg(owner, nil, header), nil
}

// ReplyRequest is Reply for a request received by a micro service endpoint.
func (o *OverflowHost) ReplyRequest(ctx context.Context, req micro.Request, data []byte, header nats.Header) error {
	send := func(m *nats.Msg) error {
		return req.Respond(m.Data, micro.WithHeaders(micro.Headers(m.Header)))
	}
	return o.reply(ctx, jsonReply, nats.Header(req.Headers()), ClientOf(req.Reply()), send, data, header, nil)
}

func (o *OverflowHost) reply(ctx context.Context, rc replyCodec, reqHeader nats.Header, client string, send func(*nats.Msg) error, data []byte, header nats.Header, held *Reservation) error {
	m := replyMsg(o.owner, data, header)
	limit := o.nc.MaxPayload()
	size := encodedSize(m)
	if size <= limit {
		return send(m)
	}
	if reqHeader.Get(protocol.HeaderOverflow) != "1" {
		return send(rc.errorMsg(o.owner, protocol.Errorf(protocol.PayloadTooLarge,
			"the reply of %d bytes is above the broker's max payload of %d and the request did not carry %s: 1; "+
				"the operation may already have completed, do not replay it automatically",
			size, limit, protocol.HeaderOverflow)))
	}
	o.beginCall()
	defer o.endCall()
	caller, err := o.callerOf(reqHeader)
	if err != nil {
		return send(rc.errorMsg(o.owner, err))
	}
	ref, err := o.park(ctx, sessionOf{client: client, caller: caller, codec: rc.codec()}, data, held)
	if err != nil {
		return send(rc.errorMsg(o.owner, err))
	}
	notice, err := rc.notice(o.owner, ref, header)
	if err != nil {
		return err
	}
	notice.Header.Set(protocol.HeaderOverflowReply, ref.ID)
	notice.Header.Set(protocol.HeaderOverflowSize, strconv.FormatInt(ref.Size, 10))
	if err := send(notice); err != nil {
		o.tell(closeParked{id: ref.ID, reason: "its reply could not be announced"})
		return err
	}
	return nil
}

// callerOf is whom a parked reply of a request with reqHeader belongs to: its token's
// `sub` when the host verifies tokens (the primary has checked it already; one that
// expired since cannot park), else nobody.
func (o *OverflowHost) callerOf(reqHeader nats.Header) (string, error) {
	if o.cfg.Tokens == nil {
		return "", nil
	}
	caller, err := o.cfg.Tokens.Verify(reqHeader.Get(protocol.HeaderAuthToken))
	if err != nil {
		return "", &protocol.Error{Code: protocol.PayloadTooLarge, Message: parkedBadToken}
	}
	return caller, nil
}

// park hands data to the host actor, which spawns the session holding it, whose it is
// as of says, and which takes over held.
func (o *OverflowHost) park(ctx context.Context, of sessionOf, data []byte, held *Reservation) (*protocol.OverflowRef, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultParkTimeout)
		defer cancel()
	}
	if int64(len(data)) > o.cfg.MaxSessionBytes {
		return nil, protocol.Errorf(protocol.PayloadTooLarge,
			"the reply of %d bytes is above the overflow limit of %d; the operation may already have completed, do not replay it automatically",
			len(data), o.cfg.MaxSessionBytes)
	}
	if !o.view.Load().serving || o.actorDone.Err() != nil {
		return nil, overflowRefused(fmt.Errorf("the overflow host %s is not serving", o.owner))
	}
	p := &parkCall{data: data, of: of, held: held, done: make(chan parkResult, 1)}
	o.tell(p)
	select {
	case r := <-p.done:
		if r.err != nil {
			if errors.Is(r.err, protocol.ErrPayloadTooLarge) {
				return nil, r.err
			}
			return nil, overflowRefused(r.err)
		}
		return &protocol.OverflowRef{ID: r.id, Size: int64(len(data)), Prefix: o.prefix, ChunkBytes: r.chunk}, nil
	case <-ctx.Done():
		p.abandoned.Store(true)
		// The actor may have parked it meanwhile: nobody would read it. One parked
		// after this check idle-expires.
		select {
		case r := <-p.done:
			if r.err == nil {
				o.tell(closeParked{id: r.id, reason: "its caller gave up waiting"})
			}
		default:
		}
		return nil, overflowRefused(fmt.Errorf("parking took too long: %w", ctx.Err()))
	}
}

func overflowRefused(cause error) error {
	return protocol.Errorf(protocol.ResourceExhausted,
		"the reply is above the broker's max payload and could not be parked (%v); the operation may already have completed, do not replay it automatically", cause)
}
