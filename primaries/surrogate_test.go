package primaries

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/abi-engine/engine/protocol"
)

// Escaped lone surrogates (issue 26): encoding/json folds "\ud800", "\udbff" and
// "\udc00" into U+FFFD, so three keys a JavaScript or Python caller sees as distinct
// would be one, and a write to the second would overwrite the first. Each is refused
// INVALID_ARGUMENT naming the member, wherever the string is; a valid pair, an escaped
// backslash before "u" and the character itself still decode.
func TestLoneSurrogatesAreRefused(t *testing.T) {
	set := Handle(func(_ context.Context, r *protocol.KVSetRequest) (protocol.Empty, error) {
		return protocol.Empty{}, nil
	})
	object := Handle(func(_ context.Context, r *protocol.ObjectRequest) (protocol.Empty, error) {
		return protocol.Empty{}, nil
	})
	for _, tc := range []struct {
		name, body string
		op         Operation
		member     string // named in the refusal; "" when the body is accepted
	}{
		{name: "high surrogate in the key", op: set, body: `{"key":"\ud800"}`, member: `"key"`},
		{name: "last high surrogate", op: set, body: `{"key":"a\udbffb"}`, member: `"key"`},
		{name: "low surrogate alone", op: set, body: `{"key":"\udc00"}`, member: `"key"`},
		{name: "upper-case hex", op: set, body: `{"key":"\uD800x"}`, member: `"key"`},
		{name: "two high surrogates", op: set, body: `{"key":"\ud800\ud800\udc00"}`, member: `"key"`},
		{name: "high then another escape", op: set, body: `{"key":"\ud800\n"}`, member: `"key"`},
		{name: "high at the end of the string", op: set, body: `{"key":"x\udbff"}`, member: `"key"`},
		{name: "context member", op: set, body: `{"key":"a","context":{"trace_id":"\udfff"}}`, member: `"context.trace_id"`},
		{name: "prefix of an object", op: object, body: `{"prefix":"p\ud800","key":"k"}`, member: `"prefix"`},
		{name: "member the request does not have", op: set, body: `{"key":"a","other":["\udc00"]}`, member: `"other"`},
		{name: "a member's name", op: set, body: `{"key":"a","\ud800":1}`, member: "name"},
		{name: "valid pair", op: set, body: `{"key":"\ud83d\ude00"}`},
		{name: "escaped backslash before u", op: set, body: `{"key":"\\ud800"}`},
		{name: "replacement character itself", op: set, body: `{"key":"\ufffd"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.op(t.Context(), []byte(tc.body))
			if tc.member == "" {
				if err != nil {
					t.Fatalf("%s: %v, want it decoded", tc.body, err)
				}
				return
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.InvalidArgument {
				t.Fatalf("%s: %v, want INVALID_ARGUMENT", tc.body, err)
			}
			if !strings.Contains(pe.Message, tc.member) || !strings.Contains(pe.Message, "surrogate") {
				t.Errorf("%s: message %q does not name %s and the lone surrogate", tc.body, pe.Message, tc.member)
			}
		})
	}
}
