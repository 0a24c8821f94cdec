package primaries

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

// Operation runs one call of one endpoint: data is the request body, the result the
// reply body. ctx is cancelled when the primary stops or its drain deadline passes.
// An error is answered with the envelope of design §4.3: a *protocol.Error keeps its
// code, anything else becomes INTERNAL (context errors are mapped, see Primary).
type Operation func(ctx context.Context, data []byte) ([]byte, error)

// Service is a kernel service as a Primary serves it: its wire name (the micro service
// name and the <service> of abi.svc.<service>.v1.<operation>) and one Operation per
// endpoint.
type Service struct {
	Name        string
	Description string
	Operations  map[string]Operation
}

// ctxType is the type every request body embeds for its "context" member.
var ctxType = reflect.TypeFor[protocol.Ctx]()

// Handle makes an Operation of a typed function. The body is decoded as JSON into a
// Req, which must embed protocol.Ctx (Handle panics otherwise, when the service is
// built); a positive context.timeout_ms bounds ctx; the result is encoded as JSON.
// Decoding failures are INVALID_ARGUMENT errors that say what was wrong.
func Handle[Req, Rep any](run func(ctx context.Context, req *Req) (Rep, error)) Operation {
	t := reflect.TypeFor[Req]()
	f, ok := t.FieldByName("Ctx")
	if t.Kind() != reflect.Struct || !ok || !f.Anonymous || f.Type != ctxType {
		panic(fmt.Sprintf("primaries.Handle: request type %s does not embed protocol.Ctx", t))
	}
	index := f.Index
	return func(ctx context.Context, data []byte) ([]byte, error) {
		req := new(Req)
		if err := Decode(data, req); err != nil {
			return nil, err
		}
		rc := reflect.ValueOf(req).Elem().FieldByIndex(index).Addr().Interface().(*protocol.Ctx)
		if c := rc.Context; c != nil && c.TimeoutMS != 0 {
			if c.TimeoutMS < 0 {
				return nil, protocol.Errorf(protocol.InvalidArgument, "context.timeout_ms must not be negative, got %d", c.TimeoutMS)
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(c.TimeoutMS)*time.Millisecond)
			defer cancel()
		}
		rep, err := run(ctx, req)
		if err != nil {
			return nil, err
		}
		out, err := json.Marshal(rep)
		if err != nil {
			return nil, protocol.Errorf(protocol.Internal, "encode the reply: %v", err)
		}
		return out, nil
	}
}

// Decode decodes a JSON request body into v. Every failure is an INVALID_ARGUMENT
// error naming what was wrong: a body that is not UTF-8 (JSON decoding would otherwise
// replace invalid bytes silently and the call would act on another key), malformed JSON,
// a member of the wrong type, or bytes that are not base64.
func Decode(data []byte, v any) error {
	if !utf8.Valid(data) {
		return protocol.Errorf(protocol.InvalidArgument, "the request body is not valid UTF-8")
	}
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var b64Err base64.CorruptInputError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return protocol.Errorf(protocol.InvalidArgument, "the request body must be a JSON object, got %s", article(typeErr.Value))
	case errors.As(err, &typeErr):
		// The path names the embedded Go struct of the "context" member; the caller
		// knows only the JSON names.
		field := strings.TrimPrefix(typeErr.Field, "Ctx.")
		return protocol.Errorf(protocol.InvalidArgument, "member %q must be %s, got %s", field, jsonKind(typeErr.Type), article(typeErr.Value))
	case errors.As(err, &syntaxErr):
		return protocol.Errorf(protocol.InvalidArgument, "the request body is not valid JSON: %v (at byte %d)", syntaxErr, syntaxErr.Offset)
	case errors.As(err, &b64Err):
		return protocol.Errorf(protocol.InvalidArgument, "a bytes member is not a valid base64 string: illegal data at input byte %d", int64(b64Err))
	default:
		return protocol.Errorf(protocol.InvalidArgument, "the request body cannot be decoded: %v", err)
	}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	default:
		return t.String()
	}
}

// article turns encoding/json's value descriptions ("number", "array", "string") into
// readable ones.
func article(value string) string {
	switch value {
	case "array", "object":
		return "an " + value
	case "":
		return "another type"
	default:
		return "a " + value
	}
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
