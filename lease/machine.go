package lease

import (
	"errors"
	"fmt"
	"time"
)

// step is what the call in flight (or the wait) is for.
type step uint8

const (
	stepNone step = iota
	stepClaimRead
	stepCreate
	stepTakeoverRead
	stepTakeover
	stepRenew
	stepRenewRead
	stepRenewCreate
	stepRelease
	stepReleaseRead
	stepPublish
)

// maxReleaseAttempts bounds the delete/re-read loop of a release.
const maxReleaseAttempts = 3

// Machine is the ownership state machine. It is not safe for concurrent use: one
// driver owns it.
type Machine struct {
	cfg   Config
	state State

	nextID   uint64
	inflight *Op
	step     step
	sentAt   time.Time // when the call in flight was sent

	// claim and standby
	seen      Record        // the holder we watch
	seenAt    time.Time     // when we first saw seen.Revision, on our clock
	seenLease time.Duration // the lease period seen's holder published; 0: none known
	retryAt   time.Time     // retry a failed claim read
	deadline  time.Time     // standby timeout
	observing bool          // claim wait or standby: the driver watches
	takeSent  time.Time     // when the last create or takeover write was sent

	// holding
	rev         uint64
	lastOK      time.Time // when the last successful renewal (or the write that took the lease) was sent
	nextRenew   time.Time
	taking      bool // the lease is ours: publishing our period before we serve
	unpublished bool // our period is not known to be published: publish after a renewal
	evict       bool // a write not ours changed the key: a read decides what follows
	evicted     bool // that eviction was reported; cleared once serving again

	releasing       bool
	releaseAttempts int
	err             error // the error a claim ended with
}

// NewMachine returns a machine in StateIdle.
func NewMachine(cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{cfg: cfg, state: StateIdle}, nil
}

// Config is the machine's configuration.
func (m *Machine) Config() Config { return m.cfg }

// State is the current state.
func (m *Machine) State() State { return m.state }

// Revision is our revision while holding the lease (serving or fenced), else 0.
func (m *Machine) Revision() uint64 {
	if m.holding() {
		return m.rev
	}
	return 0
}

// LastRenewed is when the last successful renewal (or the claim) was sent.
func (m *Machine) LastRenewed() time.Time { return m.lastOK }

// Err is the error the claim ended with, if it did.
func (m *Machine) Err() error { return m.err }

// Seen is the other holder's record while claiming or standing by.
func (m *Machine) Seen() Record { return m.seen }

// Watching reports whether the driver should watch the lease and call Observe: while
// claiming or standing by, to see the holder renew or release, and while holding, to
// see any write that is not ours (design §4.1). Never during a release: our own delete
// must not look like an eviction.
func (m *Machine) Watching() bool { return (m.observing || m.holding()) && !m.releasing }

// InFlight is the call the machine waits for, if any.
func (m *Machine) InFlight() *Op { return m.inflight }

// Deadlines are the times at which Tick has something to do; zero fields: none.
type Deadlines struct {
	Renew    time.Time // next renewal
	Fence    time.Time // fencing, while serving
	Takeover time.Time // one silent lease period after the revision seen
	Standby  time.Time // standby timeout
	Retry    time.Time // retry a claim read that failed
}

// Next is the earliest non-zero deadline, or zero.
func (d Deadlines) Next() time.Time {
	var next time.Time
	for _, t := range []time.Time{d.Renew, d.Fence, d.Takeover, d.Standby, d.Retry} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// Deadlines reports when Tick is next needed.
func (m *Machine) Deadlines() Deadlines {
	var d Deadlines
	switch {
	case m.holding():
		if !m.releasing {
			d.Renew = m.nextRenew
		}
		if m.state == StateServing {
			d.Fence = m.lastOK.Add(m.cfg.FenceAfter())
		}
	case m.observing && !m.releasing:
		d.Takeover = m.takeoverAt()
		if m.state == StateStandby {
			d.Standby = m.deadline
		}
	}
	if !m.retryAt.IsZero() && !m.releasing {
		d.Retry = m.retryAt
	}
	return d
}

// holding: the lease is ours, serving or not.
func (m *Machine) holding() bool {
	return m.state == StateServing || m.state == StateFenced || m.taking
}

// takeoverAt is when the holder we watch has been silent long enough to be taken over:
// the longer of our lease period and the one it published, after we first saw its
// revision.
func (m *Machine) takeoverAt() time.Time {
	return m.seenAt.Add(max(m.cfg.Lease, m.seenLease))
}

// Start begins the claim: the machine asks to read the lease.
func (m *Machine) Start(now time.Time) Output {
	var out Output
	if m.state != StateIdle || m.inflight != nil || m.observing || m.err != nil || m.releasing {
		return out
	}
	m.issue(&out, now, stepClaimRead, Op{Kind: OpRead})
	return out
}

// Observe reports a record the watch delivered.
func (m *Machine) Observe(now time.Time, rec Record) Output {
	var out Output
	switch {
	case !m.Watching():
	case m.holding():
		// Even with a call in flight: a renewal can hang for lease/4, and an eviction
		// must stop us serving at once.
		m.own(&out, rec)
	case m.inflight == nil:
		// A claim call in flight decides from the store itself; a watch record arriving
		// meanwhile adds nothing it will not see, and the watch may be stale.
		m.consider(&out, now, rec)
	}
	m.evaluate(&out, now)
	return out
}

// Tick lets the machine act on its deadlines.
func (m *Machine) Tick(now time.Time) Output {
	var out Output
	m.evaluate(&out, now)
	return out
}

// Release starts a clean release. The machine ends in StateReleased; it deletes the
// lease only at a revision that is ours.
func (m *Machine) Release(now time.Time) Output {
	var out Output
	if m.state.Terminal() || m.releasing {
		return out
	}
	m.releasing = true
	m.observing = false
	m.retryAt = time.Time{}
	if m.inflight == nil && !m.holding() {
		m.to(StateReleased)
		out.Events = append(out.Events, Event{Kind: EventReleaseSkipped})
		return out
	}
	m.evaluate(&out, now)
	return out
}

// Done reports the outcome of the call in flight. A result for any other call (a
// stale one, from a worker that was restarted) is ignored.
func (m *Machine) Done(now time.Time, res Result) Output {
	var out Output
	if m.inflight == nil || res.ID != m.inflight.ID {
		return out
	}
	op, st, sent := *m.inflight, m.step, m.sentAt
	m.inflight, m.step = nil, stepNone
	conflict := errors.Is(res.Err, ErrConflict)

	switch st {
	case stepClaimRead, stepTakeoverRead:
		switch {
		case res.Err != nil:
			if !m.releasing {
				m.storeError(&out, now, op, res.Err)
			}
		case m.releasing:
			// Only a lease that turns out to be ours matters now: it must be deleted.
			if !res.Record.Free() && res.Record.Holder == m.cfg.Me {
				m.take(&out, now, m.takeSent, res.Record.Revision)
			}
		case st == stepTakeoverRead && !res.Record.Free() && res.Record.Revision == m.seen.Revision:
			// Still the revision we saw a lease period ago: the holder is silent for our
			// period. One that published a longer period is judged by it: wait on.
			m.learnLease(res.Record)
			if !now.Before(m.takeoverAt()) {
				m.issue(&out, now, stepTakeover, Op{Kind: OpUpdate, Holder: m.cfg.Me, Revision: m.seen.Revision})
			}
		default:
			m.decide(&out, now, res.Record)
		}

	case stepCreate, stepTakeover:
		switch {
		case res.Err == nil:
			kind := EventAcquired
			if st == stepTakeover {
				kind = EventTookOver
			}
			out.Events = append(out.Events, Event{Kind: kind, Holder: m.seen.Holder, Revision: res.Rev})
			m.take(&out, now, sent, res.Rev)
		case m.releasing:
			// Not ours (conflict) or unknown: a create that landed unseen frees itself
			// after one lease period, as contenders time its silence.
		case conflict:
			m.issue(&out, now, stepClaimRead, Op{Kind: OpRead})
		default:
			// Unknown: the write may have landed. A read tells; if we are the holder
			// we adopt the revision read.
			out.Events = append(out.Events, Event{Kind: EventStoreError, Err: fmt.Errorf("%s: %w", op, res.Err)})
			m.issue(&out, now, stepClaimRead, Op{Kind: OpRead})
		}

	case stepRenew, stepRenewCreate:
		switch {
		case res.Err == nil:
			if st == stepRenewCreate {
				m.unpublished = true // the lease is ours again: say our period again
			}
			m.renewed(&out, now, sent, res.Rev)
			m.republish(&out, now)
		case conflict && st == stepRenew:
			m.issueAt(&out, now, sent, stepRenewRead, Op{Kind: OpRead, Renewal: true})
		case conflict:
			// Our lease was deleted and someone created it before us.
			m.lost(&out, Record{})
		default:
			m.renewFailed(&out, now, res.Err)
		}

	case stepRenewRead:
		switch {
		case res.Err != nil:
			m.renewFailed(&out, now, res.Err)
		case res.Record.Free() && m.releasing:
			m.to(StateReleased)
			out.Events = append(out.Events, Event{Kind: EventReleaseSkipped})
		case res.Record.Holder == m.cfg.Me && m.releasing:
			m.rev = res.Record.Revision // evaluate deletes at it
		case res.Record.Free():
			// Deleted from outside: take it again. The send time stays the renewal's.
			m.issueAt(&out, now, sent, stepRenewCreate, Op{Kind: OpCreate, Holder: m.cfg.Me, Renewal: true})
		case res.Record.Holder == m.cfg.Me:
			// An earlier renewal landed but its reply was lost: renew at the revision read.
			m.issueAt(&out, now, sent, stepRenew, Op{Kind: OpUpdate, Holder: m.cfg.Me, Revision: res.Record.Revision, Renewal: true})
		default:
			m.lost(&out, res.Record)
		}

	case stepRelease:
		switch {
		case res.Err == nil:
			m.to(StateReleased)
			out.Events = append(out.Events, Event{Kind: EventReleased, Revision: op.Revision})
		case conflict:
			m.issue(&out, now, stepReleaseRead, Op{Kind: OpRead})
		default:
			m.to(StateReleased)
			out.Events = append(out.Events, Event{Kind: EventReleaseFailed, Revision: op.Revision, Err: res.Err})
		}

	case stepPublish:
		m.unpublished = res.Err != nil
		if res.Err != nil {
			// Contenders judge us by their own period meanwhile; try again after the
			// next renewal.
			out.Events = append(out.Events, Event{Kind: EventStoreError, Err: fmt.Errorf("%s: %w", op, res.Err)})
		}
		if m.taking && !m.releasing {
			m.to(StateServing)
		}

	case stepReleaseRead:
		switch {
		case res.Err != nil:
			m.to(StateReleased)
			out.Events = append(out.Events, Event{Kind: EventReleaseFailed, Revision: m.rev, Err: res.Err})
		case !res.Record.Free() && res.Record.Holder == m.cfg.Me && m.releaseAttempts < maxReleaseAttempts:
			m.rev = res.Record.Revision
		default:
			// Free, or another engine's: never delete it.
			m.to(StateReleased)
			out.Events = append(out.Events, Event{Kind: EventReleaseSkipped, Holder: res.Record.Holder, Revision: res.Record.Revision})
		}
	}
	m.evaluate(&out, now)
	return out
}

// decide acts on a record read while claiming or standing by.
func (m *Machine) decide(out *Output, now time.Time, rec Record) {
	switch {
	case rec.Free():
		m.issue(out, now, stepCreate, Op{Kind: OpCreate, Holder: m.cfg.Me})
	case rec.Holder == m.cfg.Me:
		// A create or takeover whose reply was lost did land: it holds since it was sent.
		out.Events = append(out.Events, Event{Kind: EventAcquired, Revision: rec.Revision})
		m.take(out, now, m.takeSent, rec.Revision)
	case m.observing:
		m.consider(out, now, rec)
	case m.cfg.mayStandBy(rec.Holder):
		m.see(now, rec)
		m.observing = true
		m.deadline = now.Add(m.cfg.StandbyTimeout)
		m.to(StateStandby)
		out.Events = append(out.Events, Event{Kind: EventStandingBy, Holder: rec.Holder, Revision: rec.Revision})
	default:
		// Same rollout or none: watch the holder for one lease period (its own, if
		// longer).
		m.see(now, rec)
		m.observing = true
	}
}

// consider acts on a record while watching a holder (claim wait or standby).
func (m *Machine) consider(out *Output, now time.Time, rec Record) {
	switch {
	case rec.Free():
		m.issue(out, now, stepCreate, Op{Kind: OpCreate, Holder: m.cfg.Me})
	case rec.Revision == m.seen.Revision:
		// Nothing new; the silence goes on.
	case rec.Holder == m.cfg.Me:
		m.decide(out, now, rec)
	case m.state == StateStandby && rec.Holder.RolloutID == m.cfg.Me.RolloutID:
		// An engine of our own rollout got there first.
		m.fail(out, Event{Kind: EventRefused, Holder: rec.Holder, Revision: rec.Revision}, &AlreadyServingError{Holder: rec.Holder})
	case m.state == StateStandby:
		m.see(now, rec)
	case rec.Holder == m.seen.Holder:
		// The holder renewed: it is alive.
		m.fail(out, Event{Kind: EventRefused, Holder: rec.Holder, Revision: rec.Revision}, &AlreadyServingError{Holder: rec.Holder})
	default:
		// Another holder replaced the one we watched: decide afresh.
		m.observing = false
		m.decide(out, now, rec)
	}
}

// evaluate runs what the deadlines call for, when nothing is in flight.
func (m *Machine) evaluate(out *Output, now time.Time) {
	if m.state == StateServing && !now.Before(m.lastOK.Add(m.cfg.FenceAfter())) {
		m.to(StateFenced)
		out.Events = append(out.Events, Event{Kind: EventFenced, Revision: m.rev})
	}
	if m.inflight != nil || m.state.Terminal() || out.Err != nil {
		return
	}
	switch {
	case m.releasing && m.holding():
		m.releaseAttempts++
		m.issue(out, now, stepRelease, Op{Kind: OpDelete, Revision: m.rev})
	case m.releasing:
		m.to(StateReleased)
		out.Events = append(out.Events, Event{Kind: EventReleaseSkipped})
	case m.holding() && m.evict:
		// What the watch showed may already be out of date: read, and go on by the
		// rules of a renewal conflict (free: create it again; ours: renew; another's:
		// lost).
		m.issue(out, now, stepRenewRead, Op{Kind: OpRead, Renewal: true})
	case m.holding():
		if !now.Before(m.nextRenew) {
			m.issue(out, now, stepRenew, Op{Kind: OpUpdate, Holder: m.cfg.Me, Revision: m.rev, Renewal: true})
		}
	case !m.retryAt.IsZero():
		if !now.Before(m.retryAt) {
			m.retryAt = time.Time{}
			m.issue(out, now, stepClaimRead, Op{Kind: OpRead})
		}
	case m.observing:
		if !now.Before(m.takeoverAt()) {
			// Watchers can be blind for a while after a reconnect: re-read before the CAS.
			m.issue(out, now, stepTakeoverRead, Op{Kind: OpRead})
		} else if m.state == StateStandby && !now.Before(m.deadline) {
			m.fail(out, Event{Kind: EventStandbyTimedOut, Holder: m.seen.Holder, Revision: m.seen.Revision},
				&StandbyTimeoutError{Holder: m.seen.Holder, Timeout: m.cfg.StandbyTimeout})
		}
	}
}

func (m *Machine) issue(out *Output, now time.Time, st step, op Op) {
	m.issueAt(out, now, now, st, op)
}

// issueAt issues op recording sent as its send time: a renewal's re-read and the
// write that follows count from when the renewal itself was sent.
func (m *Machine) issueAt(out *Output, now, sent time.Time, st step, op Op) {
	m.nextID++
	op.ID = m.nextID
	op.Timeout = m.cfg.RenewEvery()
	if op.Kind == OpPublish {
		// A publish must not hold up serving, or the renewal after it, for long.
		op.Timeout /= 4
	}
	m.inflight, m.step, m.sentAt = &op, st, sent
	switch {
	case st == stepRenew && sent.Equal(now):
		m.nextRenew = now.Add(m.cfg.RenewEvery())
	case st == stepCreate || st == stepTakeover:
		m.takeSent = sent
	case st == stepRenewRead:
		// Sent after the eviction was seen: its answer includes it.
		m.evict = false
	}
	out.Op = &op
}

func (m *Machine) storeError(out *Output, now time.Time, op Op, err error) {
	out.Events = append(out.Events, Event{Kind: EventStoreError, Err: fmt.Errorf("%s: %w", op, err)})
	m.retryAt = now.Add(m.cfg.RenewEvery())
}

// take makes the lease ours at rev, written by a call sent at sent: liveness counts
// from then, not from when we learnt of it. We publish our lease period before we
// serve, so a contender with a shorter one never judges us by it; whatever the
// publish's outcome, we then serve. While releasing we only hold it to delete it.
func (m *Machine) take(out *Output, now, sent time.Time, rev uint64) {
	m.rev = rev
	m.lastOK = sent
	m.nextRenew = sent.Add(m.cfg.RenewEvery())
	m.observing = false
	m.retryAt = time.Time{}
	m.seen, m.seenLease = Record{}, 0
	m.taking = true
	if !m.releasing {
		m.issue(out, now, stepPublish, m.publishOp())
	}
}

func (m *Machine) publishOp() Op {
	return Op{Kind: OpPublish, Period: Period{InstanceID: m.cfg.Me.InstanceID, Lease: m.cfg.Lease}, Renewal: true}
}

// republish retries a publish that failed, after a successful renewal, when it fits
// before the next renewal is due.
func (m *Machine) republish(out *Output, now time.Time) {
	if !m.unpublished || m.state != StateServing || m.releasing || m.inflight != nil {
		return
	}
	if now.Add(m.cfg.RenewEvery() / 4).After(m.nextRenew) {
		return
	}
	m.issue(out, now, stepPublish, m.publishOp())
}

// see starts timing rec's silence from now. A watch record carries no period: the one
// known for the same engine is kept, as an engine's period never changes.
func (m *Machine) see(now time.Time, rec Record) {
	if !rec.Holder.Known() || rec.Holder.InstanceID != m.seen.Holder.InstanceID {
		m.seenLease = 0
	}
	m.seen, m.seenAt = rec, now
	m.learnLease(rec)
}

// learnLease keeps the period the holder we watch published, when rec (a read) has it.
func (m *Machine) learnLease(rec Record) {
	if l := rec.HolderLease(); l != 0 && rec.Holder.InstanceID == m.seen.Holder.InstanceID {
		m.seenLease = l
	}
}

// own acts on a record the watch delivered while we hold the lease. Our own writes are
// not news (a renewal whose reply is still on its way), nor is anything older than our
// revision (a late delivery, a watch restarted). Anything else (a delete, a purge, a
// value naming another engine or none) is an eviction: we stop serving at once, before
// a renewal could notice, and a read decides what follows.
func (m *Machine) own(out *Output, rec Record) {
	switch {
	case !rec.Free() && (rec.Holder == m.cfg.Me || rec.Revision <= m.rev):
		return
	case rec.Free() && rec.Freed != 0 && rec.Freed <= m.rev:
		return
	}
	if !m.evicted {
		m.evicted = true
		out.Events = append(out.Events, Event{Kind: EventEvicted, Holder: rec.Holder, Revision: max(rec.Revision, rec.Freed)})
	}
	m.evict = true
	if m.state != StateFenced {
		m.to(StateFenced)
	}
}

func (m *Machine) renewed(out *Output, now, sent time.Time, rev uint64) {
	m.rev = rev
	if sent.After(m.lastOK) {
		m.lastOK = sent
	}
	out.Events = append(out.Events, Event{Kind: EventRenewed, Revision: rev})
	// A success that arrives after its own fence deadline proves nothing about now, nor
	// does one sent before an eviction that no read has looked at since.
	if m.state == StateFenced && !m.evict && now.Before(m.lastOK.Add(m.cfg.FenceAfter())) {
		m.to(StateServing)
		out.Events = append(out.Events, Event{Kind: EventRestored, Revision: rev})
	}
}

// renewFailed records a renewal of unknown outcome. The next attempt comes sooner than
// a full period: a reply lost to a blip should not cost the lease/2 fencing margin.
func (m *Machine) renewFailed(out *Output, now time.Time, err error) {
	out.Events = append(out.Events, Event{Kind: EventRenewFailed, Revision: m.rev, Err: err})
	if retry := now.Add(m.cfg.RenewEvery() / 4); retry.Before(m.nextRenew) {
		m.nextRenew = retry
	}
}

func (m *Machine) lost(out *Output, rec Record) {
	m.to(StateLost)
	out.Events = append(out.Events, Event{Kind: EventLost, Holder: rec.Holder, Revision: rec.Revision})
}

func (m *Machine) fail(out *Output, ev Event, err error) {
	m.err = err
	m.observing = false
	m.seen = Record{}
	m.to(StateIdle)
	out.Events = append(out.Events, ev)
	out.Err = err
}

func (m *Machine) to(s State) {
	m.state = s
	switch {
	case s == StateServing:
		m.taking, m.evicted = false, false
	case s == StateFenced:
		m.taking = false
	case s.Terminal():
		m.taking = false
		m.observing = false
		m.retryAt = time.Time{}
	}
}
