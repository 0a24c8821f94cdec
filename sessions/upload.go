package sessions

// The overflow host's uploads (request overflow, protocol/overflowrequest.go): a client
// opens a session of operation "request" on the overflow host and writes its request
// into it; the engine serving the call then takes the upload at once when it holds it
// (takeUpload, here), or reads it from the engine that does (fetch.go). Either way the
// upload counts against the session budget while it waits, like any session.

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/abi-engine/engine/protocol"
)

// uploadHandler is the start of an upload: what was written becomes what is read, so
// another engine fetches the upload with start and reads like any download.
func uploadHandler(_ context.Context, req TransferRequest) ([]byte, error) {
	return req.Upload, nil
}

// takeUpload asks the host actor for the upload id holds, on behalf of a call made by
// caller (its token's sub; "" when the engine verifies no tokens). The session actor
// answers on done (buffered).
type takeUpload struct {
	id        string
	caller    string
	done      chan takeResult
	release   func()      // set by the host actor when it hands the upload over
	abandoned atomic.Bool // the caller gave up waiting: nobody will release the bytes but us
}

type takeResult struct {
	data    []byte
	release func() // gives the upload's bytes back to the budget once the call is done
	err     error
}

// answer delivers r once. A refusal gives the bytes the host actor detached back at
// once; a success leaves them to the caller's release, or gives them back when the
// caller gave up waiting (whichever of the two finds the answer in done does).
func (t *takeUpload) answer(r takeResult) {
	if r.err != nil {
		r.release = nil
	}
	select {
	case t.done <- r:
	default: // answered before (a crash after the answer): that answer decided
		return
	}
	if r.err != nil && t.release != nil {
		t.release()
	}
	if t.abandoned.Load() {
		t.drop()
	}
}

// drop releases an answer nobody will read.
func (t *takeUpload) drop() {
	select {
	case r := <-t.done:
		if r.release != nil {
			r.release()
		}
	default:
	}
}

// takeUpload routes t to its session's actor after checking that the session is an
// upload of t's caller, and closes the session in the same turn: t is ahead of the
// poison pill in the session actor's inbox, so it is answered from the upload, and the
// session is gone before the call's reply is sent, so the client's own close
// afterwards finds nothing, which succeeds. The upload's bytes stay taken from the
// budget, now the call's, until the call has run (the session actor's answer carries
// their release): a client cannot upload again into what its running calls still
// hold. A take refused here leaves the session as it was: another caller's upload is
// its owner's to use.
func (a *hostActor) takeUpload(t *takeUpload) {
	e := a.h.sessions[t.id]
	switch {
	case e == nil:
		t.answer(takeResult{err: uploadGone(t.id)})
	case e.op != protocol.OverflowRequestOperation:
		t.answer(takeResult{err: protocol.Errorf(protocol.InvalidArgument,
			"%s names session %s, which is not an overflow upload (operation %q)", protocol.HeaderOverflowRequest, t.id, e.op)})
	case e.caller != t.caller:
		t.answer(takeResult{err: anotherCaller(t.id)})
	default:
		held, budget, client := e.bytes, a.h.cfg.Budget, e.client
		e.bytes = 0 // closeSession gives back nothing: the bytes go with the take
		a.h.buffered -= held
		var once sync.Once
		t.release = func() { once.Do(func() { budget.give(client, held) }) }
		a.eng.Send(e.pid, t)
		a.closeSession(e, "its call took the upload")
		a.publish()
	}
}

// takeUpload hands the session's upload to the call that names it; the host actor has
// closed the session already.
func (s *sessionActor) takeUpload(t *takeUpload) {
	switch {
	case s.lost:
		t.answer(takeResult{err: uploadGone(t.id)})
	case s.started || s.running != nil || s.waiting != nil || len(s.held) > 0:
		t.answer(takeResult{err: protocol.Errorf(protocol.Conflict,
			"overflow upload %s is still being written or was started; a call takes an upload once its writes are answered", t.id)})
	default:
		data := s.joined()
		s.upload, s.uploaded = nil, 0
		t.answer(takeResult{data: data, release: t.release})
	}
}

// uploadCodec refuses an overflow upload opened in JSON: the engine serving its call
// may fetch it from another engine, and fetches speak protobuf, as the calls that name
// uploads do.
func uploadCodec(op string, c protocol.Codec) error {
	if op == protocol.OverflowRequestOperation && c != protocol.Protobuf {
		return protocol.Errorf(protocol.InvalidArgument,
			"overflow uploads (operation %q) are opened in protobuf (abi.transfer.v1.OpenRequest): a call naming one is a protobuf call", op)
	}
	return nil
}

// uploadLimit is the most a session of op may hold: the upload limit for an overflow
// upload, the host's per-session limit otherwise.
func (h *TransferHost) uploadLimit(op string) (limit int64, key string) {
	if n, ok := h.opLimits[op]; ok {
		return n, "limits.request_upload_mib"
	}
	return h.cfg.MaxSessionBytes, "limits.session_memory_mib"
}

func uploadGone(id string) error {
	return protocol.Errorf(protocol.NotFound, "overflow upload %s expired or was closed", id)
}

func anotherCaller(string) error {
	return &protocol.Error{Code: protocol.PermissionDenied, Message: otherCaller}
}
