package protocol

import (
	"bytes"
	"encoding/base64"
	"unicode/utf8"
)

// The fast path of request and reply decoding: a reader for the exact shapes the SDKs
// send and the engine answers (an object of the payload's members, spelled exactly,
// with strings without escapes, byte values as base64, whole numbers, booleans),
// without reflection. Anything else (an escape, an unknown or differently cased
// member, a null where a request has it, a fraction, a nested value) is left to the
// engine's strict decoder built on encoding/json (a reply, to encoding/json), which
// also reports every error: DecodeFast only ever says "decoded" or "not mine". What it
// decodes, it decodes to the value encoding/json gives (FuzzDecodeRequest in primaries
// and FuzzDecodeReply hold it to that).

// RequestCtx returns the request's Ctx, so a handler reaches the "context" member of
// any request without reflection.
func (c *Ctx) RequestCtx() *Ctx { return c }

// DecodeFast decodes data into r and reports true if data has the exact shape of the
// fast path; otherwise r is left zero and false is returned. r must be zero but for
// its Context, which may point to storage for the context member (a spare): the
// member is then decoded there instead of into a new RequestContext, and a body
// without one leaves Context nil, as encoding/json would. A caller that owns the
// spare, as the engine's call frame does, saves an allocation per call.
func (r *KVKeyRequest) DecodeFast(data []byte) bool {
	ms := [...]fastMember{ctxMember(&r.Ctx), {name: "key", s: &r.Key}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVKeyRequest.DecodeFast for a KVSetRequest.
func (r *KVSetRequest) DecodeFast(data []byte) bool {
	ms := [...]fastMember{ctxMember(&r.Ctx), {name: "key", s: &r.Key}, {name: "value", b: &r.Value},
		{name: "ttl_seconds", f: &r.TTLSeconds}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVKeyRequest.DecodeFast for a KVValueRequest.
func (r *KVValueRequest) DecodeFast(data []byte) bool {
	ms := [...]fastMember{ctxMember(&r.Ctx), {name: "key", s: &r.Key}, {name: "value", b: &r.Value}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVKeyRequest.DecodeFast for an ObjectRequest.
func (r *ObjectRequest) DecodeFast(data []byte) bool {
	ms := [...]fastMember{ctxMember(&r.Ctx), {name: "prefix", s: &r.Prefix}, {name: "key", s: &r.Key}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVKeyRequest.DecodeFast for a PutObjectRequest.
func (r *PutObjectRequest) DecodeFast(data []byte) bool {
	ms := [...]fastMember{ctxMember(&r.Ctx), {name: "prefix", s: &r.Prefix}, {name: "key", s: &r.Key},
		{name: "content", b: &r.Content}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVKeyRequest.DecodeFast for a ListObjectsRequest.
func (r *ListObjectsRequest) DecodeFast(data []byte) bool {
	ms := [...]fastMember{ctxMember(&r.Ctx), {name: "prefix", s: &r.Prefix}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast decodes data into r and reports true if data has the exact shape the
// engine writes (AppendJSON's, in any member order); otherwise r is left zero and
// false is returned, and the caller decodes with encoding/json.
func (r *KVGetReply) DecodeFast(data []byte) bool {
	ms := [...]fastMember{{name: "found", t: &r.Found}, {name: "value", b: &r.Value, null: true}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVGetReply.DecodeFast for a KVSetReply.
func (r *KVSetReply) DecodeFast(data []byte) bool {
	ms := [...]fastMember{{name: "set", t: &r.Set}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVGetReply.DecodeFast for a KVDeleteReply.
func (r *KVDeleteReply) DecodeFast(data []byte) bool {
	ms := [...]fastMember{{name: "deleted", t: &r.Deleted}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVGetReply.DecodeFast for a KVExistsReply.
func (r *KVExistsReply) DecodeFast(data []byte) bool {
	ms := [...]fastMember{{name: "exists", t: &r.Exists}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVGetReply.DecodeFast for a GetObjectReply.
func (r *GetObjectReply) DecodeFast(data []byte) bool {
	ms := [...]fastMember{{name: "content", b: &r.Content, null: true}}
	return decodeFast(data, ms[:]) || reset(r)
}

// DecodeFast is KVGetReply.DecodeFast for an ObjectMetadataReply.
func (r *ObjectMetadataReply) DecodeFast(data []byte) bool {
	ms := [...]fastMember{{name: "size", i: &r.Size}, {name: "modified_at", s: &r.ModifiedAt}}
	return decodeFast(data, ms[:]) || reset(r)
}

// reset zeroes a request the fast path gave up on half way, so the strict decoder
// starts from what encoding/json would start from; it returns false.
func reset[T any](r *T) bool {
	var zero T
	*r = zero
	return false
}

// fastMember is one member the fast path knows: its exact name and where it goes
// (exactly one of the pointers is set). null lets a byte member be null (nil), as the
// engine writes a missing value; requests leave null to the strict decoder.
type fastMember struct {
	name string
	s    *string
	b    *[]byte
	f    *float64
	i    *int64
	t    *bool
	c    **RequestContext
	null bool
	// spare is where the context member goes (c), if not nil; see DecodeFast.
	spare *RequestContext
}

// ctxMember is the context member of a request, taking its spare (DecodeFast) out of
// c: c.Context stays nil until the body has the member.
func ctxMember(c *Ctx) fastMember {
	m := fastMember{name: "context", c: &c.Context, spare: c.Context}
	c.Context = nil
	return m
}

// maxFastDigits bounds the whole numbers the fast path reads: fewer than 16 digits fit
// an int64 and convert to float64 exactly, as strconv.ParseFloat would give them.
const maxFastDigits = 15

func decodeFast(data []byte, ms []fastMember) bool {
	s := fastScan{b: data}
	if !s.object(ms) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

type fastScan struct {
	b []byte
	i int
}

func (s *fastScan) object(ms []fastMember) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		name, ok := s.str()
		if !ok || !s.next(':') {
			return false
		}
		var m *fastMember
		for k := range ms {
			if string(name) == ms[k].name {
				m = &ms[k]
				break
			}
		}
		if m == nil || !s.value(m) {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next('}')
	}
}

func (s *fastScan) value(m *fastMember) bool {
	switch {
	case m.s != nil:
		v, ok := s.str()
		if ok {
			*m.s = string(v)
		}
		return ok
	case m.b != nil && m.null && s.literal("null"):
		*m.b = nil
		return true
	case m.b != nil:
		v, ok := s.base64Str()
		if !ok {
			return false
		}
		// As encoding/json decodes a []byte.
		dst := make([]byte, base64.StdEncoding.DecodedLen(len(v)))
		n, err := base64.StdEncoding.Decode(dst, v)
		if err != nil {
			return false
		}
		*m.b = dst[:n]
		return true
	case m.f != nil:
		v, neg, ok := s.int()
		if !ok || (neg && v == 0) { // -0 is a float of its own; leave it to ParseFloat
			return false
		}
		*m.f = float64(v)
		return true
	case m.i != nil:
		v, _, ok := s.int()
		if ok {
			*m.i = v
		}
		return ok
	case m.t != nil:
		switch {
		case s.literal("true"):
			*m.t = true
		case s.literal("false"):
			*m.t = false
		default:
			return false
		}
		return true
	default: // the context member; a second one adds to the first, as encoding/json does
		if *m.c == nil {
			if m.spare != nil {
				*m.spare = RequestContext{}
				*m.c = m.spare
			} else {
				*m.c = new(RequestContext)
			}
		}
		c := *m.c
		ms := [...]fastMember{{name: "trace_id", s: &c.TraceID}, {name: "timeout_ms", i: &c.TimeoutMS}}
		return s.object(ms[:])
	}
}

// ws skips JSON whitespace.
func (s *fastScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next consumes c after whitespace, if it is there.
func (s *fastScan) next(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// literal consumes the literal lit (true, false, null) after whitespace, if it is
// there. What follows it is the object's to check: "truex" leaves an "x" that is
// neither a comma nor a closing brace.
func (s *fastScan) literal(lit string) bool {
	s.ws()
	end := s.i + len(lit)
	if end > len(s.b) || string(s.b[s.i:end]) != lit {
		return false
	}
	s.i = end
	return true
}

// str reads a string of valid UTF-8 without escapes or control characters and returns
// its bytes, which are then the string.
func (s *fastScan) str() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	high := false
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			// encoding/json would replace invalid UTF-8 with U+FFFD.
			if high && !utf8.Valid(s.b[start:j]) {
				return nil, false
			}
			s.i = j + 1
			return s.b[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return nil, false
}

// base64Str reads a string that must hold base64, leaving its validation to the base64
// decoder: the closing quote is found by one vectorised search instead of a loop over
// every byte, which matters for values of any size. It is exact because the decoder
// refuses every byte a JSON string cannot hold raw (a backslash, a control character)
// but '\r' and '\n', which it skips: those are refused here. An escaped quote leaves a
// backslash before it, so the decoder refuses that too, and encoding/json takes over.
func (s *fastScan) base64Str() ([]byte, bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i + 1
	n := bytes.IndexByte(s.b[start:], '"')
	if n < 0 {
		return nil, false
	}
	v := s.b[start : start+n]
	if bytes.IndexByte(v, '\n') >= 0 || bytes.IndexByte(v, '\r') >= 0 {
		return nil, false
	}
	s.i = start + n + 1
	return v, true
}

// int reads a whole number of at most maxFastDigits digits in JSON's grammar.
func (s *fastScan) int() (v int64, neg, ok bool) {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '-' {
		neg = true
		s.i++
	}
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || digits > maxFastDigits || (digits > 1 && s.b[start] == '0') {
		return 0, false, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false, false
	}
	if neg {
		v = -v
	}
	return v, neg, true
}
