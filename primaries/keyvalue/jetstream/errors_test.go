package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/protocol"
)

// Which store failures are retryable: exactly those after which the call surely changed
// nothing (docs/design.md §5.8). A write is retryable only when jserr says it was not stored;
// a read always is, as it stores nothing. Context errors go on to the primary as they
// are, which maps them (DEADLINE_EXCEEDED, or UNAVAILABLE not retryable when its run
// was stopped).
func TestWhichErrorsAreRetryable(t *testing.T) {
	s := &Store{bucket: "ABI_KV"}
	apiErr := func(code js.ErrorCode) error {
		return fmt.Errorf("nats: %w", &js.APIError{Code: 400, ErrorCode: code, Description: "test"})
	}
	cases := []struct {
		name      string
		err       error
		write     bool
		code      protocol.Code // "" for an error passed on as it is
		retryable bool
	}{
		{"ack lost: nats timeout", nats.ErrTimeout, true, protocol.Unavailable, false},
		{"connection closed after the publish", nats.ErrConnectionClosed, true, protocol.Unavailable, false},
		{"connection lost after the publish", nats.ErrDisconnected, true, protocol.Unavailable, false},
		{"an error nobody classified", errors.New("something else"), true, protocol.Unavailable, false},
		{"stream refused: message above its maximum", apiErr(js.JSErrCodeStreamMessageExceedsMaximum), true, protocol.Unavailable, true},
		{"replicated bucket judged nothing (10164)", apiErr(js.JSErrCodeStreamWrongLastSequenceConstant), true, protocol.Unavailable, true},
		{"no stream listening", js.ErrNoStreamResponse, true, protocol.Unavailable, true},
		{"no responders", nats.ErrNoResponders, true, protocol.Unavailable, true},
		{"bucket gone", js.ErrBucketNotFound, true, protocol.Unavailable, true},
		{"value above the max payload", nats.ErrMaxPayload, true, protocol.PayloadTooLarge, false},
		{"write deadline", context.DeadlineExceeded, true, "", false},
		{"write cancelled", context.Canceled, true, "", false},
		{"read: nats timeout", nats.ErrTimeout, false, protocol.Unavailable, true},
		{"read: connection closed", nats.ErrConnectionClosed, false, protocol.Unavailable, true},
		{"read deadline", context.DeadlineExceeded, false, "", false},
	}
	for _, c := range cases {
		var err error
		if c.write {
			err = s.writeError("set", "k", c.err)
		} else {
			err = s.readError("get", "k", c.err)
		}
		var pe *protocol.Error
		switch {
		case c.code == "":
			if err != c.err {
				t.Errorf("%s: got %v, want the context error passed on", c.name, err)
			}
		case !errors.As(err, &pe):
			t.Errorf("%s: got %v (%T), want a protocol error", c.name, err, err)
		case pe.Code != c.code || pe.Retryable != c.retryable:
			t.Errorf("%s: got %s retryable=%v (%s), want %s retryable=%v", c.name, pe.Code, pe.Retryable, pe.Message, c.code, c.retryable)
		}
	}
}
