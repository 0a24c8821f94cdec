package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

// wireError turns any error into the *protocol.Error a reply carries: protocol errors
// as they are, deadlines as DEADLINE_EXCEEDED, anything else as INTERNAL with its text.
func wireError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return protocol.Errorf(protocol.DeadlineExceeded, "%v", err)
	}
	return protocol.Errorf(protocol.Internal, "%v", err)
}

// replyMsg is a success reply: body plus the instance header.
func replyMsg(owner string, body []byte, header nats.Header) *nats.Msg {
	m := &nats.Msg{Data: body, Header: nats.Header{}}
	for k, vs := range header {
		m.Header[k] = append([]string(nil), vs...)
	}
	m.Header.Set(protocol.HeaderInstance, owner)
	return m
}

// errorMsg is an error reply as docs/design.md §4.3 spells it: micro's error headers, the
// Abi-Error-Code header and the {"error": {...}} envelope, plus the instance header.
func errorMsg(owner string, err error) *nats.Msg {
	pe := wireError(err)
	body, _ := json.Marshal(protocol.Envelope{Error: pe}) // marshalling three plain fields cannot fail
	m := replyMsg(owner, body, nil)
	m.Header.Set(protocol.HeaderErrorCode, string(pe.Code))
	m.Header.Set(micro.ErrorHeader, pe.Message)
	m.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(pe.Code.HTTPStatus()))
	return m
}

// jsonMsg is a success reply carrying v as JSON.
func jsonMsg(owner string, v any) (*nats.Msg, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T reply: %w", v, err)
	}
	return replyMsg(owner, body, nil), nil
}

// encodedSize is how many bytes the broker counts for m: its body plus its encoded
// headers, computed as nats.go encodes them (it checks the same sum against the
// broker's max payload before publishing).
func encodedSize(m *nats.Msg) int64 {
	n := int64(len(m.Data))
	if len(m.Header) == 0 {
		return n
	}
	n += int64(len("NATS/1.0\r\n") + len("\r\n"))
	for k, vs := range m.Header {
		for _, v := range vs {
			n += int64(len(k) + len(textproto.TrimString(v)) + 4)
		}
	}
	return n
}
