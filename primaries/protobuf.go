package primaries

// The protobuf protocol of an endpoint (the Python clients' messages), served on the
// same subject as its JSON protocol: each call chooses its codec (protocol.IsJSON) and
// is answered in it. Its errors travel inside the operation's response message with
// Abi-Error-Code, never with micro's Nats-Service-Error headers, which the Python
// clients would turn into code "500" and lose the domain code.

import (
	"context"

	"google.golang.org/protobuf/proto"

	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	"github.com/abi-engine/engine/protocol"
)

// ProtoOperation is the protobuf side of one endpoint (Service.Protobuf); HandleProto
// makes one of a typed function.
type ProtoOperation struct {
	// Run decodes the request, runs it and encodes the response message, as an
	// Operation does in JSON. An error is answered with Fail.
	Run Operation
	// Fail encodes the operation's response message with only its error set: every
	// failure of the call (decoding, the token, the lease, a stopped engine, the
	// operation's own) is answered with it.
	Fail func(e *protocol.Error) []byte
}

// contextHolder is every request message: its context is field 1.
type contextHolder interface {
	proto.Message
	GetContext() *commonv1.CallContext
}

// HandleProto makes a ProtoOperation of a typed function. newReq makes an empty
// request message; a malformed body is INVALID_ARGUMENT "invalid protobuf request"
// (unknown fields are kept and ignored, as proto3 does); a positive
// context.timeout_ms bounds ctx. failed makes the response message carrying err, the
// one field set.
func HandleProto[Req contextHolder, Rep proto.Message](newReq func() Req, run func(ctx context.Context, req Req) (Rep, error), failed func(err *commonv1.CallError) Rep) ProtoOperation {
	return HandleProtoEncoded(newReq, func(ctx context.Context, req Req) ([]byte, error) {
		rep, err := run(ctx, req)
		if err != nil {
			return nil, err
		}
		out, err := proto.Marshal(rep)
		if err != nil {
			return nil, protocol.Errorf(protocol.Internal, "encode the reply: %v", err)
		}
		return out, nil
	}, failed)
}

// HandleProtoEncoded is HandleProto for a function that returns its response message
// encoded: one that encodes it where its data already is, instead of having it copied
// by proto.Marshal (get_object's reply, read into its own buffer).
func HandleProtoEncoded[Req contextHolder, Rep proto.Message](newReq func() Req, run func(ctx context.Context, req Req) ([]byte, error), failed func(err *commonv1.CallError) Rep) ProtoOperation {
	return ProtoOperation{
		Run: func(ctx context.Context, data []byte) ([]byte, error) {
			req := newReq()
			if err := proto.Unmarshal(data, req); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgument, "invalid protobuf request: %v", err)
			}
			if c := req.GetContext(); c != nil && c.GetTimeoutMs() != 0 {
				timeout, err := callTimeout(int64(c.GetTimeoutMs()))
				if err != nil {
					return nil, err
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return run(ctx, req)
		},
		Fail: func(e *protocol.Error) []byte {
			out, err := proto.Marshal(failed(CallError(e)))
			if err != nil { // a CallError of strings and a bool always encodes
				panic("primaries: encode a protobuf error reply: " + err.Error())
			}
			return out
		},
	}
}

// CallError is e as the protobuf protocol carries it.
func CallError(e *protocol.Error) *commonv1.CallError {
	return &commonv1.CallError{Code: string(e.Code), Message: e.Message, Retryable: e.Retryable}
}
