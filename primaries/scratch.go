package primaries

import (
	"slices"
	"sync/atomic"
	"unsafe"
)

// replyScratch is the reply buffer of one endpoint's inline calls. An inline call's
// reply is published before the call returns (serve), so one buffer can carry every
// reply of the endpoint in turn, and a busy engine allocates nothing for them. It is
// lent to one call at a time: a call that finds it lent (a backlogged call of the
// endpoint served on another goroutine) allocates its own, as does a reply that
// outgrows it. A nil scratch lends nothing.
type replyScratch struct {
	lent atomic.Bool
	buf  [replySize]byte
}

// appendReply appends rep's JSON to the scratch, when it is free, or to a buffer of
// its own. A reply that outgrew the scratch is in a buffer of its own, so the loan
// ends at once; otherwise serve ends it (reclaim) once the reply is published.
func (s *replyScratch) appendReply(rep appender) []byte {
	if s == nil || !s.lent.CompareAndSwap(false, true) {
		return rep.AppendJSON(make([]byte, 0, replySize))
	}
	out := rep.AppendJSON(s.buf[:0])
	if !s.holds(out) {
		s.lent.Store(false)
	}
	return out
}

// holds reports whether out is in the scratch.
func (s *replyScratch) holds(out []byte) bool {
	return s != nil && cap(out) > 0 && unsafe.SliceData(out) == &s.buf[0]
}

// reclaim ends the loan of out, once nothing will read it again, if out is in the
// scratch; any other reply is left alone.
func (s *replyScratch) reclaim(out []byte) {
	if s.holds(out) {
		s.lent.Store(false)
	}
}

// keep returns out as a reply that may outlive the call (a parked one): a copy, when
// out is in the scratch, which it then gives back.
func (s *replyScratch) keep(out []byte) []byte {
	if !s.holds(out) {
		return out
	}
	kept := slices.Clone(out)
	s.lent.Store(false)
	return kept
}
