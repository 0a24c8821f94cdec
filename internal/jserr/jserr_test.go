package jserr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func apiErr(code jetstream.ErrorCode) error {
	return &jetstream.APIError{Code: 400, ErrorCode: code, Description: "test"}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, Committed},
		{"10071 raw", apiErr(jetstream.JSErrCodeStreamWrongLastSequence), Conflict},
		{"10071 wrapped", fmt.Errorf("kv: %w", apiErr(jetstream.JSErrCodeStreamWrongLastSequence)), Conflict},
		{"key exists", jetstream.ErrKeyExists, Conflict},
		{"revision mismatch", jetstream.ErrKeyRevisionMismatch, Conflict},
		{"10164 raw", apiErr(jetstream.JSErrCodeStreamWrongLastSequenceConstant), Undecided},
		{"10164 beside key exists", fmt.Errorf("%w: %w", jetstream.ErrKeyExists, apiErr(jetstream.JSErrCodeStreamWrongLastSequenceConstant)), Undecided},
		{"10164 beside revision mismatch", fmt.Errorf("%w: %w", jetstream.ErrKeyRevisionMismatch, apiErr(jetstream.JSErrCodeStreamWrongLastSequenceConstant)), Undecided},
		{"stream not found", apiErr(jetstream.JSErrCodeStreamNotFound), Refused},
		{"message too large", apiErr(jetstream.JSErrCodeStreamMessageExceedsMaximum), Refused},
		{"jetstream not enabled", apiErr(jetstream.JSErrCodeJetStreamNotEnabled), Refused},
		{"bad request", apiErr(jetstream.JSErrCodeBadRequest), Refused},
		{"no stream response", jetstream.ErrNoStreamResponse, Refused},
		{"no responders", nats.ErrNoResponders, Refused},
		{"max payload", nats.ErrMaxPayload, Refused},
		{"bad subject", nats.ErrBadSubject, Refused},
		{"bucket not found", jetstream.ErrBucketNotFound, Refused},
		{"stream not found sentinel", jetstream.ErrStreamNotFound, Refused},
		{"invalid key", jetstream.ErrInvalidKey, Refused},
		{"timeout", nats.ErrTimeout, Unknown},
		{"deadline", context.DeadlineExceeded, Unknown},
		{"canceled", context.Canceled, Unknown},
		{"connection closed", nats.ErrConnectionClosed, Unknown},
		{"invalid ack", jetstream.ErrInvalidJSAck, Unknown},
		{"anything else", errors.New("boom"), Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Fatalf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
			if got, want := IsConflict(tc.err), tc.want == Conflict; got != want {
				t.Fatalf("IsConflict(%v) = %v, want %v", tc.err, got, want)
			}
		})
	}
}

func TestNotStored(t *testing.T) {
	for o, want := range map[Outcome]bool{Committed: false, Conflict: true, Undecided: true, Refused: true, Unknown: false} {
		if got := o.NotStored(); got != want {
			t.Errorf("%s.NotStored() = %v, want %v", o, got, want)
		}
	}
}

func TestResend(t *testing.T) {
	undecided := apiErr(jetstream.JSErrCodeStreamWrongLastSequenceConstant)
	t.Run("undecided then committed", func(t *testing.T) {
		n := 0
		err := Resend(context.Background(), func() error {
			n++
			if n < 3 {
				return undecided
			}
			return nil
		})
		if err != nil || n != 3 {
			t.Fatalf("Resend = %v after %d writes, want nil after 3", err, n)
		}
	})
	t.Run("conflict is not resent", func(t *testing.T) {
		n := 0
		err := Resend(context.Background(), func() error { n++; return jetstream.ErrKeyExists })
		if !IsConflict(err) || n != 1 {
			t.Fatalf("Resend = %v after %d writes, want the conflict after 1", err, n)
		}
	})
	t.Run("unknown is not resent", func(t *testing.T) {
		n := 0
		err := Resend(context.Background(), func() error { n++; return nats.ErrTimeout })
		if !errors.Is(err, nats.ErrTimeout) || n != 1 {
			t.Fatalf("Resend = %v after %d writes, want the timeout after 1", err, n)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		n := 0
		err := Resend(context.Background(), func() error { n++; return undecided })
		if Classify(err) != Undecided || n != maxResends {
			t.Fatalf("Resend = %v after %d writes, want undecided after %d", err, n, maxResends)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n := 0
		err := Resend(ctx, func() error { n++; return undecided })
		if Classify(err) != Undecided || n != 1 {
			t.Fatalf("Resend = %v after %d writes, want undecided after 1", err, n)
		}
	})
}
