package actors

import (
	"maps"
	"slices"
	"time"

	"github.com/anthdm/hollywood/actor"
)

// MemberFailure is a member that was told to serve and could not: it answered
// ServeFailed and has not confirmed a Serve since. The root tells it Serve again every
// serveRetry meanwhile; the engine is not ready while any member fails (a holder with a
// member that cannot serve leaves that service unanswered), and no longer healthy once
// one has failed for a lease period.
type MemberFailure struct {
	// Member is the member's actor: "primary/keyvalue", "transfer/...".
	Member string
	// Err is why its last Serve failed.
	Err error
	// Since is when its first Serve of the run of failures failed.
	Since time.Time
}

// failing is the root's record of its failing members, by PID string; only the root's
// Receive changes it.
type failing map[string]MemberFailure

// fail records that pid could not serve, keeping when the run of failures began.
func (f *failing) fail(pid *actor.PID, err error, now time.Time) {
	if *f == nil {
		*f = failing{}
	}
	key := pid.String()
	m, ok := (*f)[key]
	if !ok {
		m = MemberFailure{Member: pid.ID, Since: now}
	}
	m.Err = err
	(*f)[key] = m
}

// served forgets pid: it confirmed a Serve.
func (f failing) served(pid *actor.PID) { delete(f, pid.String()) }

// list is what the root publishes: the failures, longest first.
func (f failing) list() []MemberFailure {
	if len(f) == 0 {
		return nil
	}
	l := slices.Collect(maps.Values(f))
	slices.SortFunc(l, func(a, b MemberFailure) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if a.Member < b.Member {
			return -1
		}
		return 1
	})
	return l
}

// Failing lists the members that were told to serve and could not, longest failing
// first; nil when every member serves what it was told (or none was told to).
func (r *Root) Failing() []MemberFailure { return r.view.Load().failing }
