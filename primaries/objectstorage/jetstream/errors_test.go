package jetstream

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/protocol"
)

// Which object store failures are retryable: a failed read, which stored nothing, and
// a put or delete whose metadata (the commit: this backend writes it itself) the server
// refused, which changed no object; not one whose answer was lost.
func TestWhichErrorsAreRetryable(t *testing.T) {
	s := &Store{bucket: "ABI_OBJECTS"}
	refused := &js.APIError{Code: 503, ErrorCode: 10077, Description: "maximum messages exceeded"}
	cases := []struct {
		name      string
		err       error
		code      protocol.Code // "" for an error passed on as it is
		retryable bool
	}{
		{"put: ack lost", s.writeError("put", "p", "k", nats.ErrTimeout), protocol.Unavailable, false},
		{"put: refused", s.writeError("put", "p", "k", refused), protocol.Unavailable, true},
		{"put: no stream", s.writeError("put", "p", "k", js.ErrNoStreamResponse), protocol.Unavailable, true},
		{"delete: ack lost", s.writeError("delete", "p", "k", nats.ErrTimeout), protocol.Unavailable, false},
		{"put: deadline", s.writeError("put", "p", "k", context.DeadlineExceeded), "", false},
		{"get: timeout", s.readError("get", "p", "k", nats.ErrTimeout), protocol.Unavailable, true},
		{"get: no stream", s.readError("get", "p", "k", js.ErrNoStreamResponse), protocol.Unavailable, true},
		{"get: missing", s.readError("get", "p", "k", js.ErrObjectNotFound), protocol.NotFound, false},
		{"get: deadline", s.readError("get", "p", "k", context.DeadlineExceeded), "", false},
	}
	for _, c := range cases {
		var pe *protocol.Error
		switch {
		case c.code == "":
			if !errors.Is(c.err, context.DeadlineExceeded) || errors.As(c.err, &pe) {
				t.Errorf("%s: got %v, want the context error passed on", c.name, c.err)
			}
		case !errors.As(c.err, &pe) || pe.Code != c.code || pe.Retryable != c.retryable:
			t.Errorf("%s: got %v, want %s retryable=%v", c.name, c.err, c.code, c.retryable)
		}
	}
}
