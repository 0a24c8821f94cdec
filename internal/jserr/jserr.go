// Package jserr classifies the outcome of a JetStream write, so every caller (the lease
// store and the JetStream backends) reads a server's answer the same way and resends
// exactly the writes that were never decided.
//
// A conditional write (an expected last sequence, a KV create or update, a delete at a
// revision) ends in one of five ways:
//
//   - Committed: stored.
//   - Conflict: the expectation failed (code 10071, ErrKeyExists, ErrKeyRevisionMismatch);
//     surely not stored.
//   - Undecided: code 10164 on a replicated stream. The leader had another proposal for
//     the same subject in flight and judged nothing (nats-server
//     server/jetstream_batching.go); surely not stored, and the same write may be sent
//     again: Resend does so.
//   - Refused: the server or the client answered with an error before storing it (any
//     other API error, no stream listening, a message above the max payload); surely
//     not stored.
//   - Unknown: the answer was lost (a timeout, a cancelled context, a connection that
//     went away): the write may have been stored.
//
// Code 10164 is checked first: nats.go wraps it as ErrKeyExists or
// ErrKeyRevisionMismatch in some paths, which would read as a conflict.
package jserr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Outcome is how a JetStream write ended. The zero value is not an outcome.
type Outcome uint8

// The outcomes; see the package doc.
const (
	Committed Outcome = iota + 1
	Conflict
	Undecided
	Refused
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Conflict:
		return "conflict"
	case Undecided:
		return "undecided"
	case Refused:
		return "refused"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// NotStored reports whether the write surely did not happen: a conflict, an undecided
// write or a refusal.
func (o Outcome) NotStored() bool { return o == Conflict || o == Undecided || o == Refused }

// Classify reads the error of a JetStream write.
func Classify(err error) Outcome {
	if err == nil {
		return Committed
	}
	if hasCode(err, jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return Undecided
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return Conflict
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return Conflict
	case errors.As(err, &apiErr):
		// The server answered: it stored nothing.
		return Refused
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject),
		errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrInvalidKey):
		// Nobody received the write, or the client never sent it.
		return Refused
	}
	return Unknown
}

// hasCode reports whether any API error in err's tree carries code. errors.As stops at
// the first one, and nats.go joins a 10164 with the sentinel of a 10071.
func hasCode(err error, code jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == code {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return hasCode(next, code)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			if hasCode(next, code) {
				return true
			}
		}
	}
	return false
}

// IsConflict reports whether err is a failed expectation (see Conflict).
func IsConflict(err error) bool { return Classify(err) == Conflict }

// maxResends bounds how often Resend sends an undecided write again.
const maxResends = 5

// Resend runs write, and runs it again while its outcome is Undecided (the leader
// judged nothing, so the same write is safe to send again), up to a few times with a
// short growing pause. It returns the last error.
func Resend(ctx context.Context, write func() error) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if attempt == maxResends || Classify(err) != Undecided {
			return err
		}
		t := time.NewTimer(time.Duration(attempt) * 10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
