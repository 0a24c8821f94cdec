package sdkemu

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
)

// Header names of the Python clients' protocol.
const (
	HeaderToken           = "Nats-Auth-Token"
	HeaderOverflow        = "Abi-Overflow"
	HeaderOverflowReply   = "Abi-Overflow-Reply"
	HeaderOverflowSize    = "Abi-Overflow-Size"
	HeaderOverflowRequest = "Abi-Overflow-Request"
	HeaderErrorCode       = "Abi-Error-Code"
	HeaderServiceError    = "Nats-Service-Error"
	HeaderServiceCode     = "Nats-Service-Error-Code"
	HeaderTraceparent     = "traceparent"
)

// ErrBadToken is a token the transport refuses to send: empty, or holding CR or LF.
var ErrBadToken = errors.New("a nonempty service token without newlines is required")

// ErrProtocol is a reply that breaks the protocol (a transfer's sequence, an owner
// that is not 32 lowercase hex, a session id without an owner).
var ErrProtocol = errors.New("transfer protocol breach")

// RPCError is a call the service answered with an error: the code of its error field,
// or of micro's headers ("500", or UNKNOWN when only the text is there).
type RPCError struct {
	Code, Message string
	// Response is the decoded reply, nil for a micro error.
	Response proto.Message
}

func (e *RPCError) Error() string { return e.Code + ": " + e.Message }

// Transport is one client connection, as the SDK's Transport: one token (or a function
// giving it per call) and one timeout for each exchange.
type Transport struct {
	nc      *nats.Conn
	token   func() string
	timeout time.Duration
	// Traceparent, when set, is sent on every call, as the SDK does inside a span.
	Traceparent string
}

// New makes a transport on nc. token is consulted on every call.
func New(nc *nats.Conn, token func() string, timeout time.Duration) *Transport {
	return &Transport{nc: nc, token: token, timeout: timeout}
}

// Reply is what came back for a call: the final reply's headers and body (for a
// parked reply: the notice's headers and the downloaded body).
type Reply struct {
	Header nats.Header
	Body   []byte
	// Parked is the id of the parked reply the body was read from, "" when the body
	// came in the reply itself.
	Parked string
	// Uploaded is the id of the upload the request went through, "" when it fitted.
	Uploaded string
}

// Call sends req on subject and decodes the answer into resp, following the SDK's
// Transport.call. A reply whose error field is set returns the reply and an *RPCError.
func (t *Transport) Call(ctx context.Context, subject string, req, resp proto.Message) (*Reply, error) {
	token, err := t.checkedToken()
	if err != nil {
		return nil, err
	}
	body, err := proto.Marshal(t.withContext(req))
	if err != nil {
		return nil, err
	}
	h := t.headers(token, true)
	if headerBlock(h)+len(body) <= int(t.nc.MaxPayload()) {
		return t.send(ctx, subject, h, body, resp)
	}
	id, err := t.upload(ctx, body)
	if err != nil {
		return nil, err
	}
	// Closed whatever the call's outcome; the engine may have closed it already.
	defer t.closeSession(OverflowPrefix, id)
	return t.CallUploaded(ctx, subject, id, resp)
}

// Upload sends req (its context filled) to the overflow host as the SDK does with a
// request too large for one message, whatever its size, and returns the upload's id
// for CallUploaded. The caller closes it (Session(OverflowPrefix, id).Close).
func (t *Transport) Upload(ctx context.Context, req proto.Message) (string, error) {
	if _, err := t.checkedToken(); err != nil {
		return "", err
	}
	body, err := proto.Marshal(t.withContext(req))
	if err != nil {
		return "", err
	}
	return t.upload(ctx, body)
}

// CallUploaded is the call of a request uploaded as id: an empty body and
// Abi-Overflow-Request, the reply read as Call reads it. It does not close the upload.
func (t *Transport) CallUploaded(ctx context.Context, subject, id string, resp proto.Message) (*Reply, error) {
	token, err := t.checkedToken()
	if err != nil {
		return nil, err
	}
	h := t.headers(token, true)
	h.Set(HeaderOverflowRequest, id)
	rep, err := t.send(ctx, subject, h, nil, resp)
	if rep != nil {
		rep.Uploaded = id
	}
	return rep, err
}

// send is one call and the reading of its reply: micro's headers first, a parked
// reply downloaded, then the body decoded and its error field looked at.
func (t *Transport) send(ctx context.Context, subject string, h nats.Header, body []byte, resp proto.Message) (*Reply, error) {
	msg, err := t.request(ctx, subject, h, body)
	if err != nil {
		return nil, err
	}
	rep := &Reply{Header: msg.Header, Body: msg.Data}
	if err := microError(msg.Header); err != nil {
		return rep, err
	}
	if id := msg.Header.Get(HeaderOverflowReply); id != "" {
		rep.Parked = id
		if rep.Body, err = t.download(ctx, id, msg.Header.Get(HeaderOverflowSize)); err != nil {
			return rep, err
		}
	}
	if err := proto.Unmarshal(rep.Body, resp); err != nil {
		return rep, fmt.Errorf("decode %s: %w", resp.ProtoReflect().Descriptor().FullName(), err)
	}
	return rep, ErrorOf(resp)
}

// checkedToken is the call's token, refused as the SDK refuses it.
func (t *Transport) checkedToken() (string, error) {
	token := t.token()
	if token == "" || strings.ContainsAny(token, "\r\n") {
		return "", ErrBadToken
	}
	return token, nil
}

// headers are the headers of a call: the token, Abi-Overflow: 1 unless this is an
// overflow chunk exchange, and the trace.
func (t *Transport) headers(token string, overflow bool) nats.Header {
	h := nats.Header{}
	h.Set(HeaderToken, token)
	if overflow {
		h.Set(HeaderOverflow, "1")
	}
	if t.Traceparent != "" {
		h.Set(HeaderTraceparent, t.Traceparent)
	}
	return h
}

// request is one exchange bounded by the transport's timeout, as asyncio.wait_for
// bounds it in the SDK.
func (t *Transport) request(ctx context.Context, subject string, h nats.Header, body []byte) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Header: h, Data: body})
}

// withContext is a copy of req with its context filled: trace_id when empty,
// timeout_ms always. The caller's message is left as it was.
func (t *Transport) withContext(req proto.Message) proto.Message {
	req = proto.Clone(req)
	m := req.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("context")
	if fd == nil || fd.Message() == nil {
		return req
	}
	c := &commonv1.CallContext{}
	if m.Has(fd) {
		c = proto.Clone(m.Get(fd).Message().Interface()).(*commonv1.CallContext)
	}
	if c.TraceId == "" {
		c.TraceId = uuid4()
	}
	c.TimeoutMs = int32(t.timeout / time.Millisecond)
	m.Set(fd, protoreflect.ValueOfMessage(c.ProtoReflect()))
	return req
}

// ErrorOf is the *RPCError of a decoded reply whose field named error is set, nil
// otherwise.
func ErrorOf(resp proto.Message) error {
	e := CallErrorOf(resp)
	if e == nil {
		return nil
	}
	return &RPCError{Code: e.GetCode(), Message: e.GetMessage(), Response: resp}
}

// CallErrorOf is the error field of a decoded reply, nil when it is not set. The
// field's number differs by message (2 in a result oneof, 1, or 15 in transfers): the
// SDK finds it by name, and so does this.
func CallErrorOf(resp proto.Message) *commonv1.CallError {
	m := resp.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("error")
	if fd == nil || !m.Has(fd) {
		return nil
	}
	e, _ := m.Get(fd).Message().Interface().(*commonv1.CallError)
	return e
}

// microError is the error of a reply carrying micro's error headers, checked before
// the body is decoded.
func microError(h nats.Header) error {
	text, code := h.Get(HeaderServiceError), h.Get(HeaderServiceCode)
	if text == "" && code == "" {
		return nil
	}
	if code == "" {
		code = "UNKNOWN"
	}
	if text == "" {
		text = "Remote error"
	}
	return &RPCError{Code: code, Message: text}
}

// headerBlock is the size of h on the wire, as the SDK counts it against the max
// payload: "NATS/1.0\r\n", each "K: V\r\n", and the closing "\r\n".
func headerBlock(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// uuid4 is a random UUID in its 36-character form, as Python's str(uuid4()).
func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
