package protocol

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Appenders of the reply bodies: each AppendJSON appends to b exactly the bytes
// json.Marshal writes for the value (FuzzAppendJSON holds them to that), without
// reflection. A string with anything encoding/json escapes is handed to encoding/json,
// so the escaping is its own.

// AppendJSON appends r as JSON.
func (r KVGetReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"found":`...)
	b = strconv.AppendBool(b, r.Found)
	b = append(b, `,"value":`...)
	b = appendBytes(b, r.Value)
	return append(b, '}')
}

// AppendJSON appends r as JSON.
func (r KVSetReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"set":`...)
	b = strconv.AppendBool(b, r.Set)
	return append(b, '}')
}

// AppendJSON appends r as JSON.
func (r KVDeleteReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"deleted":`...)
	b = strconv.AppendBool(b, r.Deleted)
	return append(b, '}')
}

// AppendJSON appends r as JSON.
func (r KVExistsReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"exists":`...)
	b = strconv.AppendBool(b, r.Exists)
	return append(b, '}')
}

// AppendJSON appends {}.
func (Empty) AppendJSON(b []byte) []byte { return append(b, "{}"...) }

// AppendJSON appends r as JSON. b grows once, to the reply's size: growing by appends
// would hold the old and the new buffer at once, for an object of tens of MiB more
// than the engine reserved for its reply.
func (r GetObjectReply) AppendJSON(b []byte) []byte {
	b = slices.Grow(b, len(`{"content":""}`)+base64.StdEncoding.EncodedLen(len(r.Content)))
	b = append(b, `{"content":`...)
	b = appendBytes(b, r.Content)
	return append(b, '}')
}

// AppendJSON appends r as JSON.
func (r ListObjectsReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"keys":`...)
	if r.Keys == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, k := range r.Keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// AppendJSON appends r as JSON.
func (r ObjectMetadataReply) AppendJSON(b []byte) []byte {
	b = append(b, `{"size":`...)
	b = strconv.AppendInt(b, r.Size, 10)
	b = append(b, `,"modified_at":`...)
	b = appendString(b, r.ModifiedAt)
	return append(b, '}')
}

// AppendJSON appends the error envelope as JSON.
func (e Envelope) AppendJSON(b []byte) []byte {
	b = append(b, `{"error":`...)
	if e.Error == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"code":`...)
		b = appendString(b, string(e.Error.Code))
		b = append(b, `,"message":`...)
		b = appendString(b, e.Error.Message)
		b = append(b, `,"retryable":`...)
		b = strconv.AppendBool(b, e.Error.Retryable)
		b = append(b, '}')
	}
	return append(b, '}')
}

// SizeJSON is about how many bytes AppendJSON writes for a reply of n value bytes, to
// size the buffer once.
func SizeJSON(n int) int { return 48 + base64.StdEncoding.EncodedLen(n) }

// appendBytes appends v as encoding/json writes a []byte: null, or a base64 string.
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendString appends s as a JSON string. Printable ASCII that encoding/json leaves
// alone is copied; anything else (a quote, a backslash, control characters, the HTML
// characters <, > and &, any non-ASCII) goes through json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x20, c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			// A copy, so that s does not escape to json.Marshal: callers' strings and
			// the requests holding them stay on their stacks.
			q, err := json.Marshal(strings.Clone(s))
			if err != nil { // a string always encodes
				panic(err)
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Appenders of the request bodies, for the SDKs: each appends what json.Marshal writes
// for the request (FuzzAppendRequestJSON holds them to that) and fails where it fails.

// AppendJSON appends r as JSON.
func (r KVKeyRequest) AppendJSON(b []byte) ([]byte, error) {
	b = appendCtx(b, r.Ctx)
	b = appendString(append(b, `"key":`...), r.Key)
	return append(b, '}'), nil
}

// AppendJSON appends r as JSON; a TTL that is not a finite number is json.Marshal's
// error.
func (r KVSetRequest) AppendJSON(b []byte) ([]byte, error) {
	b = appendCtx(b, r.Ctx)
	b = appendString(append(b, `"key":`...), r.Key)
	b = appendBytes(append(b, `,"value":`...), r.Value)
	if r.TTLSeconds != 0 {
		var err error
		if b, err = appendFloat(append(b, `,"ttl_seconds":`...), r.TTLSeconds); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// AppendJSON appends r as JSON.
func (r KVValueRequest) AppendJSON(b []byte) ([]byte, error) {
	b = appendCtx(b, r.Ctx)
	b = appendString(append(b, `"key":`...), r.Key)
	b = appendBytes(append(b, `,"value":`...), r.Value)
	return append(b, '}'), nil
}

// AppendJSON appends r as JSON.
func (r ObjectRequest) AppendJSON(b []byte) ([]byte, error) {
	b = appendCtx(b, r.Ctx)
	b = appendString(append(b, `"prefix":`...), r.Prefix)
	b = appendString(append(b, `,"key":`...), r.Key)
	return append(b, '}'), nil
}

// AppendJSON appends r as JSON.
func (r PutObjectRequest) AppendJSON(b []byte) ([]byte, error) {
	b = appendCtx(b, r.Ctx)
	b = appendString(append(b, `"prefix":`...), r.Prefix)
	b = appendString(append(b, `,"key":`...), r.Key)
	b = appendBytes(append(b, `,"content":`...), r.Content)
	return append(b, '}'), nil
}

// AppendJSON appends r as JSON.
func (r ListObjectsRequest) AppendJSON(b []byte) ([]byte, error) {
	b = appendCtx(b, r.Ctx)
	b = appendString(append(b, `"prefix":`...), r.Prefix)
	return append(b, '}'), nil
}

// appendCtx opens a request object and writes its context member, if any, with the
// comma after it.
func appendCtx(b []byte, c Ctx) []byte {
	b = append(b, '{')
	if c.Context == nil {
		return b
	}
	b = append(b, `"context":{`...)
	sep := false
	if c.Context.TraceID != "" {
		b = appendString(append(b, `"trace_id":`...), c.Context.TraceID)
		sep = true
	}
	if c.Context.TimeoutMS != 0 {
		if sep {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `"timeout_ms":`...), c.Context.TimeoutMS, 10)
	}
	return append(b, "},"...)
}

// appendFloat appends f as encoding/json writes a float64: plain decimals between 1e-6
// and 1e21, anything else (exponents, NaN and infinities, which fail) by json.Marshal.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if abs := math.Abs(f); abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64), nil
	}
	q, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, q...), nil
}
