package primaries

// Strict decoding of request bodies (issue 15): encoding/json, plus a walk of the body
// against the request type that refuses what encoding/json would let through. The
// kernel requests mostly take protocol's fast path (DecodeFast) instead; whatever it
// does not take comes here.

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

// Decode decodes a JSON request body into v. Every failure is an INVALID_ARGUMENT
// error naming what was wrong: a body that is not UTF-8 (JSON decoding would otherwise
// replace invalid bytes silently and the call would act on another key), malformed JSON,
// a member of the wrong type or a number that does not fit it, bytes that are not a
// base64 string (encoding/json would take an array of numbers), or a member whose name
// differs from one of the request's only in case (encoding/json would match it; a
// member named "KEY" is not the key). Members the request does not have are ignored.
func Decode(data []byte, v any) error {
	return decodeWith(data, v, schemaOf(reflect.TypeOf(v)))
}

// fastDecoder is a request type with a fast path (protocol's DecodeFast).
type fastDecoder interface{ DecodeFast(data []byte) bool }

// decodeWith is Decode with the schema of v's type made once, by Handle.
func decodeWith(data []byte, v any, s *schema) error {
	if !utf8.Valid(data) {
		return protocol.Errorf(protocol.InvalidArgument, "the request body is not valid UTF-8")
	}
	if json.Valid(data) {
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := s.walk(dec, data, ""); err != nil {
			return err
		}
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
	case errors.As(err, &typeErr) && strings.HasPrefix(typeErr.Value, "number ") && isNumber(typeErr.Type):
		return protocol.Errorf(protocol.InvalidArgument, "member %q must be %s, got %s",
			fieldName(typeErr.Field), numberRange(typeErr.Type), strings.TrimPrefix(typeErr.Value, "number "))
	case errors.As(err, &typeErr):
		return protocol.Errorf(protocol.InvalidArgument, "member %q must be %s, got %s", fieldName(typeErr.Field), jsonKind(typeErr.Type), article(typeErr.Value))
	case errors.As(err, &syntaxErr):
		return protocol.Errorf(protocol.InvalidArgument, "the request body is not valid JSON: %v (at byte %d)", syntaxErr, syntaxErr.Offset)
	case errors.As(err, &b64Err):
		return protocol.Errorf(protocol.InvalidArgument, "a bytes member is not a valid base64 string: illegal data at input byte %d", int64(b64Err))
	default:
		return protocol.Errorf(protocol.InvalidArgument, "the request body cannot be decoded: %v", err)
	}
}

// fieldName is encoding/json's path of a member as the caller knows it: without the
// embedded Go struct of the "context" member.
func fieldName(path string) string { return strings.TrimPrefix(path, "Ctx.") }

// schema is what the strict walk needs of a Go type: the exact member names of a
// struct, and which values are bytes.
type schema struct {
	kind    schemaKind
	members map[string]*schema // kindStruct: by exact JSON name
	elem    *schema            // kindList, kindMap
}

type schemaKind uint8

const (
	kindOther  schemaKind = iota // scalars, interfaces, custom unmarshalers: encoding/json judges
	kindStruct                   // members matched case-sensitively
	kindBytes                    // a base64 string only
	kindList
	kindMap
)

var unmarshalerTypes = []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()}

// schemaOf builds the schema of t (a type, or a pointer to one).
func schemaOf(t reflect.Type) *schema { return buildSchema(t, map[reflect.Type]*schema{}) }

func buildSchema(t reflect.Type, seen map[reflect.Type]*schema) *schema {
	if t == nil {
		return &schema{}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := seen[t]; ok {
		return s
	}
	s := &schema{}
	seen[t] = s
	for _, u := range unmarshalerTypes {
		if t.Implements(u) || reflect.PointerTo(t).Implements(u) {
			return s
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		s.kind, s.members = kindStruct, map[string]*schema{}
		addMembers(s, t, seen)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s.kind = kindBytes
			break
		}
		s.kind, s.elem = kindList, buildSchema(t.Elem(), seen)
	case reflect.Array:
		s.kind, s.elem = kindList, buildSchema(t.Elem(), seen)
	case reflect.Map:
		s.kind, s.elem = kindMap, buildSchema(t.Elem(), seen)
	}
	return s
}

// addMembers adds t's fields by their JSON names, promoting the fields of embedded
// structs without a name of their own, as encoding/json does.
func addMembers(s *schema, t reflect.Type, seen map[reflect.Type]*schema) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addMembers(s, ft, seen)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := s.members[name]; !dup { // the shallower field wins
			s.members[name] = buildSchema(f.Type, seen)
		}
	}
}

// walk reads one value from dec (valid JSON, read from raw) and refuses what s does not
// allow, and every string that holds an escaped lone surrogate (surrogate.go).
func (s *schema) walk(dec *json.Decoder, raw []byte, path string) error {
	tok, err := token(dec, raw, path, false)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return err
		}
		return nil // cannot happen on valid JSON; encoding/json reports it
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar: encoding/json checks its type and range
	}
	switch {
	case d == '[' && s.kind == kindBytes:
		return protocol.Errorf(protocol.InvalidArgument, "member %q must be a base64 string, got an array", path)
	case d == '{' && s.kind == kindStruct:
		for dec.More() {
			t, err := token(dec, raw, path, true)
			if err != nil {
				return err
			}
			name, _ := t.(string)
			m, ok := s.members[name]
			if !ok {
				if known := s.folded(name); known != "" {
					return protocol.Errorf(protocol.InvalidArgument,
						"member %q is not one of this request's: member names are case-sensitive (did you mean %q?)", join(path, name), join(path, known))
				}
				m = &schema{} // a member it does not have: ignored
			}
			if err := m.walk(dec, raw, join(path, name)); err != nil {
				return err
			}
		}
	case d == '{' && s.kind == kindMap:
		for dec.More() {
			t, err := token(dec, raw, path, true)
			if err != nil {
				return err
			}
			name, _ := t.(string)
			if err := s.elem.walk(dec, raw, join(path, name)); err != nil {
				return err
			}
		}
	case d == '[' && s.kind == kindList:
		for dec.More() {
			if err := s.elem.walk(dec, raw, path); err != nil {
				return err
			}
		}
	default: // another shape than the type's: encoding/json says what is wrong
		skip := &schema{}
		for dec.More() {
			if d == '{' {
				if _, err := token(dec, raw, path, true); err != nil {
					return err
				}
			}
			if err := skip.walk(dec, raw, path); err != nil {
				return err
			}
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return nil
}

// folded is the member name that name matches only when case is ignored (as
// encoding/json matches names), or "".
func (s *schema) folded(name string) string {
	for known := range s.members {
		if strings.EqualFold(known, name) {
			return known
		}
	}
	return ""
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
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

func isNumber(t reflect.Type) bool { return jsonKind(t) == "a number" }

// numberRange says which numbers a numeric Go type holds.
func numberRange(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number that fits a " + strconv.Itoa(t.Bits()) + "-bit float"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number from 0 that fits " + strconv.Itoa(t.Bits()) + " bits"
	default:
		return "a whole number that fits " + strconv.Itoa(t.Bits()) + " bits (signed)"
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
