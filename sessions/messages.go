package sessions

// The messages the sessions package's actors exchange among themselves and with the
// goroutines they start. The role commands and their replies are actors' (messages.go
// there); every other message a host or session actor takes is here.

import (
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"
)

// To the host actor.
type (
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
		of sessionOf
		// held, when not nil, is what the call reserved ahead: the session takes it.
		held      *Reservation
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
