package sessions

// The protobuf protocol of a transfer host (package abi.transfer.v1, the Python
// clients'), served beside the JSON one on the same subjects. A session speaks the
// codec of its open (or of the call whose reply was parked): requests are decoded
// here into the protocol.Transfer*Request the JSON protocol decodes to, so the host
// and session actors run one protocol, and replies are encoded back in the call's
// codec. A protobuf error travels in the response's field 15 with Abi-Error-Code,
// never with micro's Nats-Service-Error headers, which the Python clients turn into
// code "500" and so lose the domain code.

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/protocol"
)

// codecOf is the codec of a transfer request: protobuf for a body that is not JSON
// (protocol.IsJSON), the empty body included.
func codecOf(m *nats.Msg) protocol.Codec {
	if protocol.IsJSON(m.Data) {
		return protocol.JSON
	}
	return protocol.Protobuf
}

// pbRead is a read's answer in a protobuf session: done comes in a reply of its own,
// after the last data, and frameEnd marks the last data piece.
type pbRead struct {
	data     []byte
	sequence uint64
	frameEnd bool
	done     bool
}

// decodeProto decodes the protobuf request of op into the JSON protocol's request type.
func decodeProto(op string, data []byte) (id string, req any, err error) {
	bad := func(err error) (string, any, error) {
		return "", nil, protocol.Errorf(protocol.InvalidArgument, "invalid protobuf transfer %s request: %v", op, err)
	}
	switch op {
	case protocol.TransferOpen:
		var r transferv1.OpenRequest
		if err := proto.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return "", &protocol.TransferOpenRequest{
			Ctx:        ctxOf(r.GetContext()),
			Operation:  r.GetOperation(),
			Metadata:   json.RawMessage(r.GetMetadata()),
			ChunkBytes: int(r.GetChunkBytes()),
		}, nil
	case protocol.TransferWrite:
		var r transferv1.WriteRequest
		if err := proto.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.GetId(), &protocol.TransferWriteRequest{Ctx: ctxOf(r.GetContext()), ID: r.GetId(), Sequence: r.GetSequence(), Data: r.GetData()}, nil
	case protocol.TransferStart:
		var r transferv1.StartRequest
		if err := proto.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.GetId(), &protocol.TransferStartRequest{Ctx: ctxOf(r.GetContext()), ID: r.GetId()}, nil
	case protocol.TransferRead:
		var r transferv1.ReadRequest
		if err := proto.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.GetId(), &protocol.TransferReadRequest{Ctx: ctxOf(r.GetContext()), ID: r.GetId(), Sequence: r.GetSequence()}, nil
	case protocol.TransferClose:
		var r transferv1.CloseRequest
		if err := proto.Unmarshal(data, &r); err != nil {
			return bad(err)
		}
		return r.GetId(), &protocol.TransferCloseRequest{Ctx: ctxOf(r.GetContext()), ID: r.GetId()}, nil
	}
	return "", nil, protocol.Errorf(protocol.InvalidArgument, "transfer operation %q has no protobuf request", op)
}

// ctxOf is the JSON protocol's context of a protobuf one: only the timeout is read.
func ctxOf(c *commonv1.CallContext) protocol.Ctx {
	if c == nil || c.GetTimeoutMs() <= 0 {
		return protocol.Ctx{}
	}
	return protocol.Ctx{Context: &protocol.RequestContext{TraceID: c.GetTraceId(), TimeoutMS: int64(c.GetTimeoutMs())}}
}

// protoReply is the protobuf response of a reply the host and session actors give in
// the JSON protocol's types (or pbRead).
func protoReply(v any) (proto.Message, error) {
	switch r := v.(type) {
	case protocol.TransferOpenReply:
		return &transferv1.OpenResponse{Id: r.ID, ChunkBytes: uint32(r.ChunkBytes)}, nil
	case protocol.TransferWriteReply:
		return &transferv1.WriteResponse{}, nil
	case protocol.TransferStartReply:
		return &transferv1.StartResponse{}, nil
	case pbRead:
		return &transferv1.ReadResponse{Data: r.data, Sequence: r.sequence, FrameEnd: r.frameEnd, Done: r.done}, nil
	case protocol.Empty:
		return &transferv1.CloseResponse{}, nil
	}
	return nil, fmt.Errorf("no protobuf response for a %T reply", v)
}

// protoFailure is op's response message with only its error set.
func protoFailure(op string, e *commonv1.CallError) proto.Message {
	switch op {
	case protocol.TransferOpen:
		return &transferv1.OpenResponse{Error: e}
	case protocol.TransferWrite:
		return &transferv1.WriteResponse{Error: e}
	case protocol.TransferStart:
		return &transferv1.StartResponse{Error: e}
	case protocol.TransferRead:
		return &transferv1.ReadResponse{Error: e}
	default:
		return &transferv1.CloseResponse{Error: e}
	}
}

// protoMsg is a protobuf success reply: the response plus the instance header.
func protoMsg(owner string, v any) (*nats.Msg, error) {
	rep, err := protoReply(v)
	if err != nil {
		return nil, err
	}
	body, err := proto.Marshal(rep)
	if err != nil {
		return nil, fmt.Errorf("encode %T reply: %w", rep, err)
	}
	return replyMsg(owner, body, nil), nil
}

// protoErrorMsg is a protobuf error reply of op: its response with the error in field
// 15, Abi-Error-Code and the instance header.
func protoErrorMsg(owner, op string, err error) *nats.Msg {
	pe := wireError(err)
	return protoErrorBody(owner, pe, func(e *protocol.Error) []byte {
		// A message of strings, a bool and an int always encodes.
		body, _ := proto.Marshal(protoFailure(op, &commonv1.CallError{Code: string(e.Code), Message: e.Message, Retryable: e.Retryable}))
		return body
	})
}

// protoErrorBody is an error reply whose body encode makes (the response message of
// the operation that failed, with only its error set).
func protoErrorBody(owner string, pe *protocol.Error, encode func(*protocol.Error) []byte) *nats.Msg {
	m := replyMsg(owner, encode(pe), nil)
	m.Header.Set(protocol.HeaderErrorCode, string(pe.Code))
	return m
}
