package client

import (
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

// checkNames refuses keys and prefixes that are not valid UTF-8 before anything is
// sent: JSON encoding would replace the bad bytes and the call would silently reach
// another key. pairs are (what, value) pairs such as ("key", key).
func (t *Transport) checkNames(service, op string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !utf8.ValidString(pairs[i+1]) {
			return t.failed(&CallError{
				Subject: protocol.ServiceSubject(service, op),
				Err:     protocol.Errorf(protocol.InvalidArgument, "%s %q is not valid UTF-8", pairs[i], pairs[i+1]),
			})
		}
	}
	return nil
}
