package sessions

// The messages the sessions package's actors exchange among themselves and with the
// goroutines they start. The role commands and their replies are actors' (messages.go
// there); every other message a host or session actor takes is here.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
)

// To the host actor.
type (
	// roleRequest is a role command from a method of TransferHost (Serve,
	// StopAccepting, Stop, Close) instead of from an actor: it is answered on done.
	roleRequest struct {
		role roleKind
		ctx  context.Context // the caller's; bounds the step it starts
		done chan error      // buffered: the actor never waits for the caller
	}

	// stepDone reports that the broker step run has finished; its result is in run.
	stepDone struct{ run *stepRun }

	// drainDone reports the end of the wait for sessions a StopAccepting from an
	// actor started: err is nil once nothing is open, else the deadline's error.
	drainDone struct {
		to    *actor.PID
		err   error
		epoch uint64 // the host's epochs when it began: a Stop since ended it
	}

	// reapTick asks the host actor to close idle sessions. The reaper sends it.
	reapTick struct{}

	// callEnded reports that a call routed to session e has been answered (whoever
	// answered it): the session is idle from now on unless more calls are pending.
	callEnded struct{ e *entry }

	// reserve asks for n more bytes of the host's budget for session e, after giving
	// back release (the upload a start consumed). Sent by e's actor, which waits for
	// reserved before it goes on with the session. A start's result that does not fit
	// ends the session (ends): the host answers call itself, after closing it.
	reserve struct {
		e       *entry
		n       int64
		release int64
		ends    bool
		call    *call
	}

	// endSession asks the host actor to close session e and then to fail call with
	// err: a failed start ends its session before it is answered.
	endSession struct {
		e      *entry
		reason string
		call   *call
		err    error
	}

	// sessionLost reports that session e's actor crashed and lost its session.
	sessionLost struct{ e *entry }

	// closeParked asks the host actor to close a parked reply nobody will read.
	closeParked struct {
		id     string
		reason string
	}

	// parkCall asks the host actor to park data as a read-only session (the overflow
	// host). It is answered on done.
	parkCall struct {
		data []byte
		// of is whose: the client of the request's reply subject, its token's `sub`
		// and its codec, which the reads of the parked reply use.
		of        sessionOf
		done      chan parkResult // buffered: the actor never waits for the caller
		abandoned atomic.Bool
	}

	// redelivery is a role command or report whose handling crashed, sent again once.
	redelivery struct{ msg any }
)

type parkResult struct {
	id    string
	chunk int
	err   error
}

// To a session actor.
type (
	// reserved answers reserve: err is why the bytes were refused.
	reserved struct{ err error }

	// reserveAhead is a running handler's TransferRequest.Reserve: n bytes of the
	// budget for what it is about to produce, answered on reply (buffered).
	reserveAhead struct {
		call  *call // the start whose handler asks
		n     int64
		reply chan error
	}

	// startDone carries a handler's outcome back to its session actor.
	startDone struct {
		call   *call
		result []byte
		err    error
		upload int64 // bytes of the upload the handler consumed
	}
)

// roleKind names a role command.
type roleKind int

const (
	roleServe roleKind = iota + 1
	roleStopAccepting
	roleStop
	roleClose
)

func (k roleKind) String() string {
	switch k {
	case roleServe:
		return "serve"
	case roleStopAccepting:
		return "stop accepting"
	case roleStop:
		return "stop"
	case roleClose:
		return "close"
	}
	return "unknown role command"
}

// roleCmd is a role command waiting for its turn, and who to answer.
type roleCmd struct {
	role     roleKind
	ctx      context.Context // bounds its step; the caller's for a method, else the host's life
	deadline time.Time       // StopAccepting from an actor: the drain's bound
	from     *actor.PID      // an actor to answer with role replies, or nil
	done     chan error      // a method to answer, or nil
}
