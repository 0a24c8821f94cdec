package client

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

// CallError is every error a Transport returns. It carries the wire error (an engine's
// error reply, or one this client made up for what happened on the way) and, when the
// failure happened on the way, the cause from nats.go or the context.
//
// Both unwrap, so callers match either:
//
//	errors.Is(err, protocol.ErrNotFound)   // by code
//	errors.As(err, &perr)                  // perr *protocol.Error: code, message, retryable
//	errors.Is(err, nats.ErrNoResponders)   // nobody received the call
//	errors.Is(err, context.DeadlineExceeded)
type CallError struct {
	// Subject is the subject that was called.
	Subject string
	// Instance is the engine instance that answered with an error; empty when no engine
	// answered.
	Instance string
	// Err is the wire error; never nil.
	Err *protocol.Error
	// Cause is the transport-level cause, nil for an engine's error reply.
	Cause error
}

func (e *CallError) Error() string {
	s := e.Subject + ": " + e.Err.Error()
	if e.Instance != "" {
		s += " (engine " + e.Instance + ")"
	}
	if e.Cause != nil {
		s += " (" + e.Cause.Error() + ")"
	}
	return s
}

// Unwrap exposes both the wire error and the cause to errors.Is and errors.As.
func (e *CallError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// isErrorReply reports whether an engine's reply is an error reply: it carries our code
// header or micro's.
func isErrorReply(m *nats.Msg) bool {
	return m.Header.Get(protocol.HeaderErrorCode) != "" || m.Header.Get(micro.ErrorCodeHeader) != ""
}

// decodeErrorReply turns an error reply into a protocol error. The envelope in the body
// wins; without one (a micro error raised outside our handlers, such as a panic), the
// code comes from our header or from micro's status, and the message from micro's
// description. Such an error is never retryable: nothing says the call did not run.
func decodeErrorReply(m *nats.Msg) *protocol.Error {
	var env protocol.Envelope
	if err := json.Unmarshal(m.Data, &env); err == nil && env.Error != nil && env.Error.Code != "" {
		return env.Error
	}
	code := protocol.Code(m.Header.Get(protocol.HeaderErrorCode))
	if code == "" {
		code = codeOfStatus(m.Header.Get(micro.ErrorCodeHeader))
	}
	msg := m.Header.Get(micro.ErrorHeader)
	if msg == "" {
		msg = "error reply without a message"
	}
	return &protocol.Error{Code: code, Message: msg}
}

// codeOfStatus maps micro's status header back to a code, the inverse of
// protocol.Code.HTTPStatus.
func codeOfStatus(status string) protocol.Code {
	n, err := strconv.Atoi(status)
	if err != nil {
		return protocol.Internal
	}
	for _, c := range protocol.Codes {
		if c != protocol.Internal && c.HTTPStatus() == n {
			return c
		}
	}
	return protocol.Internal
}

// transportError describes a request that got no reply. The code says what the caller
// may do: UNAVAILABLE with retryable true means nothing ran; DEADLINE_EXCEEDED means the
// call may have run and is not to be resent blindly.
func transportError(subject string, err error, retried bool, window string) *CallError {
	ce := &CallError{Subject: subject, Cause: err}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		msg := "no engine serves this subject"
		if retried {
			msg = "no engine answered within the retry window of " + window
		}
		ce.Err = &protocol.Error{Code: protocol.Unavailable, Message: msg, Retryable: true}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		ce.Err = &protocol.Error{Code: protocol.DeadlineExceeded, Message: "no reply before the deadline; the call may have run, so it was not resent"}
	case errors.Is(err, context.Canceled):
		ce.Err = &protocol.Error{Code: protocol.Unavailable, Message: "the caller cancelled the call; it may have run"}
	case errors.Is(err, nats.ErrMaxPayload):
		ce.Err = &protocol.Error{Code: protocol.PayloadTooLarge, Message: "the request exceeds the broker's max payload"}
	case errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrInvalidMsg), errors.Is(err, nats.ErrBadTimeout):
		ce.Err = &protocol.Error{Code: protocol.InvalidArgument, Message: "the request cannot be sent"}
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrInvalidConnection):
		ce.Err = &protocol.Error{Code: protocol.Unavailable, Message: "the NATS connection is not usable; the call may have run"}
	default:
		ce.Err = &protocol.Error{Code: protocol.Internal, Message: "the request failed on the way"}
	}
	return ce
}
