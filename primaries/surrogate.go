package primaries

import (
	"bytes"
	"encoding/json"

	"github.com/abi-engine/engine/protocol"
)

// Escaped lone surrogates (issue 26). JSON lets a string spell a UTF-16 surrogate as
// \uD800-\uDFFF; a high one followed by a low one is one character, anything else is
// no character at all, and encoding/json replaces it with U+FFFD. "\ud800", "\udbff"
// and "\ufffd" would then be one key to the engine while a JavaScript or Python caller
// sees three, and a write to one would overwrite another. The strict walk refuses such
// a string, naming where it is.

// checkString refuses the raw JSON string token raw (quotes included) when it holds an
// escaped lone surrogate. what names the string for the caller.
func checkString(raw []byte, what string) error {
	if bytes.IndexByte(raw, '\\') < 0 {
		return nil
	}
	if esc, ok := loneSurrogate(raw); ok {
		return protocol.Errorf(protocol.InvalidArgument,
			"%s holds the escaped lone surrogate %s, which is no character (JSON decoders turn it into U+FFFD, so distinct strings would become one); send a valid surrogate pair or the character itself", what, esc)
	}
	return nil
}

// loneSurrogate finds the first \u escape in raw that is a surrogate not paired (a
// high one followed by a low one), and returns it as written.
func loneSurrogate(raw []byte) (string, bool) {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // a two-character escape: "\\" must not make the next "u" an escape
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			continue // not valid JSON: encoding/json says so
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return string(raw[i : i+6]), true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo, ok := hex4(raw, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11 // the pair is one character
					continue
				}
			}
			return string(raw[i : i+6]), true
		default:
			i += 5
		}
	}
	return "", false
}

// hex4 reads the four hex digits at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// token reads the next token of dec, refusing a string (a value, or a member's name
// when name is set) that holds an escaped lone surrogate. raw is what dec reads.
func token(dec *json.Decoder, raw []byte, path string, name bool) (json.Token, error) {
	start := dec.InputOffset()
	tok, err := dec.Token()
	if _, ok := tok.(string); ok && err == nil {
		what := "the request body"
		switch {
		case name && path == "":
			what = "the name of a member of the request"
		case name:
			what = "the name of a member of " + quote(path)
		case path != "":
			what = "member " + quote(path)
		}
		if end := dec.InputOffset(); start >= 0 && end <= int64(len(raw)) {
			if err := checkString(raw[start:end], what); err != nil {
				return nil, err
			}
		}
	}
	return tok, err
}

func quote(s string) string { return `"` + s + `"` }
