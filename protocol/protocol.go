// Package protocol holds what the engine and its clients agree on over the wire: the
// error codes and their envelope, the headers, and the subject names of docs/design.md §4.2-§4.3.
// Both sides import it, so a code or a header is spelled in one place only.
package protocol

import (
	"errors"
	"fmt"
)

// Headers every engine reply carries or may carry.
const (
	// HeaderInstance names the engine instance that answered.
	HeaderInstance = "Abi-Engine-Instance"
	// HeaderErrorCode carries the Code of an error reply.
	HeaderErrorCode = "Abi-Error-Code"
)

// Code is a stable error code. Clients match on it, never on a message.
type Code string

// The codes of docs/design.md §4.3.
const (
	InvalidArgument   Code = "INVALID_ARGUMENT"
	NotFound          Code = "NOT_FOUND"
	Conflict          Code = "CONFLICT"
	PayloadTooLarge   Code = "PAYLOAD_TOO_LARGE"
	ResourceExhausted Code = "RESOURCE_EXHAUSTED"
	DeadlineExceeded  Code = "DEADLINE_EXCEEDED"
	Unavailable       Code = "UNAVAILABLE"
	Internal          Code = "INTERNAL"
	// Unauthenticated refuses a call without a valid service token (Nats-Auth-Token):
	// nothing ran.
	Unauthenticated Code = "UNAUTHENTICATED"
)

// Codes of the protobuf protocol only: the Python clients map them to their own
// exceptions (KVNotFoundError, ObjectNotFound), where the JSON protocol answers a
// missing key with found=false and a missing object with NOT_FOUND.
const (
	KVNotFound     Code = "KV_NOT_FOUND"
	ObjectNotFound Code = "OBJECT_NOT_FOUND"
)

// PermissionDenied refuses an exchange on a transfer session or parked reply from a
// caller (the service token's sub) other than the one it belongs to: nothing ran.
const PermissionDenied Code = "PERMISSION_DENIED"

// Codes lists every code, in the order of the design.
var Codes = []Code{InvalidArgument, NotFound, Conflict, PayloadTooLarge, ResourceExhausted, DeadlineExceeded, Unavailable, Internal, Unauthenticated}

// Valid reports whether c is one of Codes.
func (c Code) Valid() bool {
	for _, k := range Codes {
		if c == k {
			return true
		}
	}
	return false
}

// HTTPStatus is the status micro's Nats-Service-Error-Code header carries for c.
func (c Code) HTTPStatus() int {
	switch c {
	case InvalidArgument:
		return 400
	case NotFound:
		return 404
	case Conflict:
		return 409
	case PayloadTooLarge:
		return 413
	case ResourceExhausted:
		return 429
	case DeadlineExceeded:
		return 504
	case Unavailable:
		return 503
	case Unauthenticated:
		return 401
	case PermissionDenied:
		return 403
	default:
		return 500
	}
}

// Error is an error that crosses the wire. Backends return it, the engine sends it as
// the envelope, and clients decode the envelope back into it, so errors.Is and
// errors.As work the same on both sides of a NATS call.
//
// Retryable true means exactly "nothing ran": the call changed nothing anywhere, so it
// may be sent again as it is (docs/design.md §5.8). Only Refused and Exhausted make one; a failure of
// unknown outcome (a lost ack, a commit whose result never came back) is never
// retryable, whatever its code.
type Error struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Errorf builds an Error with a formatted message. It is never retryable: whether a
// failed call ran is not something a code can tell, so the caller who knows that
// nothing ran says so with Refused.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Refused builds the one retryable error: UNAVAILABLE for a call that changed nothing.
// Use it only where that is certain: the call was refused before it touched a backend
// (the per-call lease check, a stopped engine), or the backend surely did not apply it
// (a write the store answered with a refusal, a read, which applies nothing).
func Refused(format string, args ...any) *Error {
	return &Error{Code: Unavailable, Message: fmt.Sprintf(format, args...), Retryable: true}
}

// Exhausted builds RESOURCE_EXHAUSTED for a call refused before it ran because a limit
// of the engine is reached (calls queued, session memory): retryable, since nothing
// ran, but a caller should back off before it sends it again.
func Exhausted(format string, args ...any) *Error {
	return &Error{Code: ResourceExhausted, Message: fmt.Sprintf(format, args...), Retryable: true}
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is matches any *Error with the same code, so errors.Is(err, protocol.ErrNotFound)
// holds for every not-found error whatever its message.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}

// Sentinels for errors.Is. Compare codes with them; never return them unwrapped when a
// message can say more.
var (
	ErrInvalidArgument   = &Error{Code: InvalidArgument}
	ErrNotFound          = &Error{Code: NotFound}
	ErrConflict          = &Error{Code: Conflict}
	ErrPayloadTooLarge   = &Error{Code: PayloadTooLarge}
	ErrResourceExhausted = &Error{Code: ResourceExhausted}
	ErrDeadlineExceeded  = &Error{Code: DeadlineExceeded}
	ErrUnavailable       = &Error{Code: Unavailable}
	ErrInternal          = &Error{Code: Internal}
	ErrUnauthenticated   = &Error{Code: Unauthenticated}
)

// CodeOf is the code of err: the code of the *Error it wraps, or Internal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Envelope is the body of an error reply: {"error": {...}}.
type Envelope struct {
	Error *Error `json:"error"`
}

// RequestContext is the optional "context" member every request may carry.
type RequestContext struct {
	TraceID   string `json:"trace_id,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// Subject helpers (docs/design.md §4.2).
const (
	// ServicePrefix starts every kernel service subject.
	ServicePrefix = "abi.svc."
	// ServiceVersion is the micro version every kernel service registers.
	ServiceVersion = "1.0.0"
)

// ServiceSubject is the subject of a kernel service operation:
// abi.svc.<service>.v1.<operation>.
func ServiceSubject(service, operation string) string {
	if s := kernelSubject(service, operation); s != "" {
		return s
	}
	return ServicePrefix + service + ".v1." + operation
}

// kernelSubject is ServiceSubject of a kernel operation as a constant, "" for any other:
// the SDK names a subject on every call, and a concatenation allocates.
func kernelSubject(service, operation string) string {
	switch service {
	case KeyValue:
		switch operation {
		case OpGet:
			return ServicePrefix + KeyValue + ".v1." + OpGet
		case OpSet:
			return ServicePrefix + KeyValue + ".v1." + OpSet
		case OpSetIfNotExists:
			return ServicePrefix + KeyValue + ".v1." + OpSetIfNotExists
		case OpDelete:
			return ServicePrefix + KeyValue + ".v1." + OpDelete
		case OpDeleteIfValueMatches:
			return ServicePrefix + KeyValue + ".v1." + OpDeleteIfValueMatches
		case OpExists:
			return ServicePrefix + KeyValue + ".v1." + OpExists
		case OpListKeys:
			return ServicePrefix + KeyValue + ".v1." + OpListKeys
		case OpGetTTL:
			return ServicePrefix + KeyValue + ".v1." + OpGetTTL
		}
	case ObjectStorage:
		switch operation {
		case OpPutObject:
			return ServicePrefix + ObjectStorage + ".v1." + OpPutObject
		case OpGetObject:
			return ServicePrefix + ObjectStorage + ".v1." + OpGetObject
		case OpDeleteObject:
			return ServicePrefix + ObjectStorage + ".v1." + OpDeleteObject
		case OpListObjects:
			return ServicePrefix + ObjectStorage + ".v1." + OpListObjects
		case OpGetObjectMetadata:
			return ServicePrefix + ObjectStorage + ".v1." + OpGetObjectMetadata
		case OpListObjectsRecursive:
			return ServicePrefix + ObjectStorage + ".v1." + OpListObjectsRecursive
		}
	}
	return ""
}

// TransferPrefix is the transfer subject prefix of a kernel service:
// abi.svc.<service>.v1.transfer.
func TransferPrefix(service string) string { return ServicePrefix + service + ".v1.transfer" }
