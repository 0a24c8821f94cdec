package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxCallBody bounds a body read from standard input or a file: far above any broker's
// max_payload (1 MiB by default, 64 MiB at most), so the broker, not this, refuses a
// body too large, and a wrong file (a disk image) fails at once.
const maxCallBody = 64 << 20

// callBody is the body of call from its argument: JSON itself, "-" for standard input or
// "@FILE" for a file's content (as curl -d and natscli take them), so a body larger than
// an argument may be (the kernel refuses one over 128 KiB) can be sent.
func callBody(arg string, stdin io.Reader) ([]byte, string, error) {
	var what string
	var r io.Reader
	switch {
	case arg == "-":
		what, r = "the body on standard input", stdin
	case strings.HasPrefix(arg, "@"):
		f, err := os.Open(arg[1:])
		if err != nil {
			return nil, "", fmt.Errorf("the body file: %w", err)
		}
		defer f.Close()
		what, r = "the body in "+arg[1:], f
	default:
		return []byte(arg), fmt.Sprintf("JSON argument %q", arg), nil
	}
	if r == nil {
		return nil, "", fmt.Errorf("%s: there is no standard input", what)
	}
	body, err := io.ReadAll(io.LimitReader(r, maxCallBody+1))
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("read %s: %w", what, err)
	case len(body) > maxCallBody:
		return nil, "", fmt.Errorf("%s is over %d MiB", what, maxCallBody>>20)
	}
	return bytes.TrimSpace(body), what, nil
}

// bytesMembers are the members the kernel services read as bytes: base64 strings
// (docs/protocol.md, "Payloads").
var bytesMembers = []string{"value", "content", "data"}

// checkBytesMembers names a bytes member whose string is not base64, before anything is
// sent: the engine refuses it too, but without naming the member.
func checkBytesMembers(body []byte) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil // not an object: the engine says so
	}
	for _, name := range bytesMembers {
		var s string
		if raw, ok := obj[name]; !ok || json.Unmarshal(raw, &s) != nil {
			continue // absent, null or not a string: the engine names it
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			return fmt.Errorf("member %q is not a valid base64 string (standard alphabet, with padding): %v; nothing was sent", name, err)
		}
	}
	return nil
}
