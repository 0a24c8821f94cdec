package lease

import (
	"time"

	"github.com/abi-engine/engine/internal/failpoint"
)

// maxReleaseAttempts bounds the delete/re-read loop of a release.
const maxReleaseAttempts = 3

// Machine is the ownership state machine, a transition function: each input (Start,
// Observe, ObserveEpoch, Tick, Done, Release, MarkDrained, StoreAhead) moves it from one SubState to
// the next, by the table below, and returns the Output that says everything the driver
// must do. It is not safe for concurrent use: one driver owns it.
//
// The public States and the sub-states they are made of:
//
//	idle      unstarted; claim-reading, claim-retry-wait, creating (no holder watched);
//	          claim-watching, watch-reading, watch-retry-wait, watch-creating, taking-over
//	          (a holder of our rollout, or of none, watched for a silent lease);
//	          publishing-period, settling-epoch (ours, not serving yet); releasing-claim;
//	          refused
//	standby   standby, standby-reading, standby-retry-wait, standby-creating,
//	          standby-taking-over, standby-publishing-period, standby-settling-epoch
//	serving   holding, renewing, renew-reading, renew-creating, republishing-period,
//	          advancing-epoch, releasing
//	fenced    fenced, fenced-renewing, fenced-renew-reading, fenced-renew-creating,
//	          fenced-publishing-period, fenced-settling-epoch, evicted, evicted-reading,
//	          fenced-releasing, evicted-releasing
//	lost      lost
//	released  released, marking-drained
//
// A sub-state named after a call (reading, creating, taking-over, renewing, publishing)
// has that call in flight; the settling and advancing ones an epoch read or write, and
// marking-drained the mark's; evicted and the releasing ones have one call in flight,
// of the kind their rows name (a release first waits for the call sent before it, named
// by its purpose: a claim's or a renewal's; an epoch settle's); the others have none.
// The inputs: Start; Observe (a record the watch delivered; ObserveEpoch, one the epoch
// watch delivered, only ever makes a deadline due); Done (the outcome of the call in
// flight, named below by the call and its outcome: ok, conflict (surely not committed)
// or unknown); Release; MarkDrained; StoreAhead (a data store holds a newer epoch: like
// ObserveEpoch, it only makes the epoch due); and Deadline, a deadline reached, which the
// machine checks on Tick and after every other input. "ours" is a record naming us;
// "silent" is a full lease period (the longer of ours and the one the holder published)
// without a new revision since we first saw it; "in time" is a success sent less than
// lease/2 ago; "our period to publish" is a period not known to be published, whose
// publish fits before the next renewal.
//
// The epoch (settle.go, docs/architecture.md "Epoch"): every write that takes the lease
// (a claim's, a create of a lease found free while holding it) leaves the epoch to
// settle, and the holder serves only once it has: it reads the record and either
// writes the next epoch ("bump it"), or, when another engine drains the one recorded
// (a clean release) and our drain_seconds since the take have not passed, serves under
// it ("defer") and bumps once the record changes or that time passes ("epoch due"). A
// holder that serves already goes on under its epoch while it settles the next. A
// release from serving marks the record draining before its delete ("(delete)" in a
// releasing row: after the mark, if one is due), and MarkDrained marks it drained.
//
// The deadlines each sub-state keeps: the renewal in every sub-state of a held lease
// outside a release, the fence while serving, the takeover while a holder is watched
// (not while waiting to retry a read), the standby timeout while standing by, the
// retry in the retry waits, the epoch in holding while a bump is deferred (or a settle
// is to be tried again).
//
// The transition table (an input not listed for a sub-state leaves it as it is):
//
//	unstarted                 Start                                           → claim-reading
//	                          Release                                         → released
//
//	claim-reading             Done read: free                                 → creating
//	                          Done read: ours                                 → publishing-period
//	                          Done read: another rollout holds it             → standby
//	                          Done read: our rollout holds it, or we have none → claim-watching
//	                          Done read: our rollout holds it, hot (stand by) → standby
//	                          Done read: released to us (take it at once)     → taking-over
//	                          Done read: unknown                              → claim-retry-wait
//	                          Release                                         → releasing-claim
//
//	claim-retry-wait          Deadline retry due                              → claim-reading
//	                          Release                                         → released
//
//	creating                  Done create: ok                                 → publishing-period
//	                          Done create: conflict or unknown                → claim-reading
//	                          Release                                         → releasing-claim
//
//	claim-watching            Observe free                                    → watch-creating
//	                          Observe ours                                    → publishing-period
//	                          Observe the holder watched renewed              → refused
//	                          Observe another holder, another rollout         → standby
//	                          Observe another holder, of our rollout or we have none → claim-watching
//	                          Observe released to us (take it at once)        → taking-over
//	                          Observe released to another (silent from here)  → claim-watching
//	                          Deadline takeover due                           → watch-reading
//	                          Release                                         → released
//
//	watch-reading             Done read: the revision watched, silent         → taking-over
//	                          Done read: the revision watched, not yet silent → claim-watching
//	                          Done read: free                                 → watch-creating
//	                          Done read: ours                                 → publishing-period
//	                          Done read: the holder watched renewed           → refused
//	                          Done read: another holder, another rollout      → standby
//	                          Done read: another holder, of our rollout or we have none → claim-watching
//	                          Done read: released to us (take it at once)     → taking-over
//	                          Done read: released to another (silent from here) → claim-watching
//	                          Done read: unknown                              → watch-retry-wait
//	                          Release                                         → releasing-claim
//
//	watch-retry-wait          Deadline retry due                              → watch-reading
//	                          Observe free                                    → watch-creating
//	                          Observe ours                                    → publishing-period
//	                          Observe the holder watched renewed              → refused
//	                          Observe another holder, another rollout         → standby
//	                          Observe another holder, of our rollout or we have none → claim-watching
//	                          Observe released to us (take it at once)        → taking-over
//	                          Observe released to another (silent from here)  → claim-watching
//	                          Release                                         → released
//
//	watch-creating            Done create: ok                                 → publishing-period
//	                          Done create: conflict or unknown                → watch-reading
//	                          Release                                         → releasing-claim
//
//	taking-over               Done update: ok                                 → publishing-period
//	                          Done update: conflict or unknown                → watch-reading
//	                          Release                                         → releasing-claim
//
//	standby                   Observe free                                    → standby-creating
//	                          Observe ours                                    → standby-publishing-period
//	                          Observe an engine of our rollout                → refused
//	                          Observe another revision or holder              → standby
//	                          Observe an engine of our rollout, hot (wait on) → standby
//	                          Observe released to us (take it at once)        → standby-taking-over
//	                          Observe released to another (silent from here)  → standby
//	                          Deadline takeover due                           → standby-reading
//	                          Deadline standby timeout                        → refused
//	                          Release                                         → released
//
//	standby-reading           Done read: the revision watched, silent         → standby-taking-over
//	                          Done read: the revision watched, not yet silent → standby
//	                          Done read: free                                 → standby-creating
//	                          Done read: ours                                 → standby-publishing-period
//	                          Done read: an engine of our rollout             → refused
//	                          Done read: another revision or holder           → standby
//	                          Done read: an engine of our rollout, hot (wait on) → standby
//	                          Done read: released to us (take it at once)     → standby-taking-over
//	                          Done read: released to another (silent from here) → standby
//	                          Done read: unknown                              → standby-retry-wait
//	                          Release                                         → releasing-claim
//
//	standby-retry-wait        Deadline retry due                              → standby-reading
//	                          Deadline standby timeout                        → refused
//	                          Observe free                                    → standby-creating
//	                          Observe ours                                    → standby-publishing-period
//	                          Observe an engine of our rollout                → refused
//	                          Observe another revision or holder              → standby
//	                          Observe an engine of our rollout, hot (wait on) → standby
//	                          Observe released to us (take it at once)        → standby-taking-over
//	                          Observe released to another (silent from here)  → standby
//	                          Release                                         → released
//
//	standby-creating          Done create: ok                                 → standby-publishing-period
//	                          Done create: conflict or unknown                → standby-reading
//	                          Release                                         → releasing-claim
//
//	standby-taking-over       Done update: ok                                 → standby-publishing-period
//	                          Done update: conflict or unknown                → standby-reading
//	                          Release                                         → releasing-claim
//
//	publishing-period         Done publish: any outcome                       → settling-epoch
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing-claim
//
//	standby-publishing-period Done publish: any outcome                       → standby-settling-epoch
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing-claim
//
//	settling-epoch            Done epoch read: bump it (write the next)       → settling-epoch
//	                          Done epoch read: another engine drains it (defer) → holding
//	                          Done epoch write: ok                            → holding
//	                          Done epoch write: conflict, < 2 writes (read)   → settling-epoch
//	                          Done epoch call: unknown, a second conflict, or the fence passed → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing-claim
//
//	standby-settling-epoch    Done epoch read: bump it (write the next)       → standby-settling-epoch
//	                          Done epoch read: another engine drains it (defer) → holding
//	                          Done epoch write: ok                            → holding
//	                          Done epoch write: conflict, < 2 writes (read)   → standby-settling-epoch
//	                          Done epoch call: unknown, a second conflict, or the fence passed → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing-claim
//
//	holding                   Deadline renewal due                            → renewing
//	                          Deadline fence due                              → fenced
//	                          Deadline epoch due                              → advancing-epoch
//	                          Observe a write not ours                        → evicted-reading
//	                          Release                                         → releasing
//
//	renewing                  Done update: ok                                 → holding
//	                          Done update: ok, our period to publish          → republishing-period
//	                          Done update: conflict                           → renew-reading
//	                          Done update: unknown                            → holding
//	                          Deadline fence due                              → fenced-renewing
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing
//
//	renew-reading             Done read: ours                                 → renewing
//	                          Done read: free                                 → renew-creating
//	                          Done read: another holder                       → lost
//	                          Done read: unknown                              → holding
//	                          Deadline fence due                              → fenced-renew-reading
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing
//
//	renew-creating            Done create: ok (settle the epoch)              → advancing-epoch
//	                          Done create: conflict                           → lost
//	                          Done create: unknown                            → holding
//	                          Deadline fence due                              → fenced-renew-creating
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing
//
//	republishing-period       Done publish: any outcome                       → holding
//	                          Deadline fence due                              → fenced-publishing-period
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing
//
//	advancing-epoch           Done epoch read: bump it (write the next)       → advancing-epoch
//	                          Done epoch read: another engine drains it (defer) → holding
//	                          Done epoch read: our write landed               → holding
//	                          Done epoch write: ok                            → holding
//	                          Done epoch write: conflict, < 2 writes (read)   → advancing-epoch
//	                          Done epoch call: unknown, a second conflict, or the fence passed (later) → holding
//	                          Deadline fence due                              → fenced-settling-epoch
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → releasing
//
//	fenced                    Deadline renewal due                            → fenced-renewing
//	                          Observe a write not ours                        → evicted-reading
//	                          Release                                         → fenced-releasing
//
//	fenced-renewing           Done update: ok in time                         → holding
//	                          Done update: ok in time, our period to publish  → republishing-period
//	                          Done update: ok in time, the epoch to settle    → fenced-settling-epoch
//	                          Done update: ok too late                        → fenced
//	                          Done update: conflict                           → fenced-renew-reading
//	                          Done update: unknown                            → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → fenced-releasing
//
//	fenced-renew-reading      Done read: ours                                 → fenced-renewing
//	                          Done read: free                                 → fenced-renew-creating
//	                          Done read: another holder                       → lost
//	                          Done read: unknown                              → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → fenced-releasing
//
//	fenced-renew-creating     Done create: ok in time (settle the epoch)      → fenced-settling-epoch
//	                          Done create: ok too late                        → fenced
//	                          Done create: conflict                           → lost
//	                          Done create: unknown                            → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → fenced-releasing
//
//	fenced-publishing-period  Done publish: any outcome                       → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → fenced-releasing
//
//	fenced-settling-epoch     Done epoch read: bump it (write the next)       → fenced-settling-epoch
//	                          Done epoch read: another engine drains it (defer) → holding
//	                          Done epoch read: our write landed               → holding
//	                          Done epoch write: ok                            → holding
//	                          Done epoch write: conflict, < 2 writes (read)   → fenced-settling-epoch
//	                          Done epoch call: unknown, a second conflict, or the fence passed → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → fenced-releasing
//
//	evicted                   Done update or create: ok (counted, no restore) → evicted-reading
//	                          Done update: conflict                           → evicted-reading
//	                          Done any call: unknown                          → evicted-reading
//	                          Done publish: any outcome                       → evicted-reading
//	                          Done read: free (create it)                     → evicted
//	                          Done read: ours (renew at it)                   → evicted
//	                          Done read: another holder                       → lost
//	                          Done create: conflict                           → lost
//	                          Done epoch call: any outcome                    → evicted-reading
//	                          Release                                         → evicted-releasing
//
//	evicted-reading           Done read: ours                                 → fenced-renewing
//	                          Done read: free                                 → fenced-renew-creating
//	                          Done read: another holder                       → lost
//	                          Done read: unknown                              → fenced
//	                          Observe a write not ours                        → evicted
//	                          Release                                         → fenced-releasing
//
//	releasing-claim           Done claim read: ours (delete it)               → releasing-claim
//	                          Done claim read: not ours, or unknown           → released
//	                          Done create or update: ok (delete it)           → releasing-claim
//	                          Done create or update: conflict or unknown      → released
//	                          Done publish: any outcome (delete)              → releasing-claim
//	                          Done delete: ok or unknown                      → released
//	                          Done delete: conflict (read)                    → releasing-claim
//	                          Done release read: ours, < 3 deletes (delete)   → releasing-claim
//	                          Done release read: other, or unknown            → released
//	                          Done epoch call: any outcome (delete)           → releasing-claim
//
//	releasing                 Done renewal: ok (delete)                       → releasing
//	                          Done renewal: update conflict (read)            → releasing
//	                          Done renewal: unknown (delete)                  → releasing
//	                          Done renewal read: ours (delete at it)          → releasing
//	                          Done renewal read: free                         → released
//	                          Done renewal: another holder                    → lost
//	                          Done publish: any outcome (delete)              → releasing
//	                          Done delete: ok or unknown                      → released
//	                          Done delete: conflict (read)                    → releasing
//	                          Done hand-off write: ok or unknown              → released
//	                          Done hand-off write: conflict (read)            → releasing
//	                          Done release read: ours, < 3 deletes (delete)   → releasing
//	                          Done release read: other, or unknown            → released
//	                          Done epoch settle: any outcome (mark draining, or delete) → releasing
//	                          Done mark draining: ok or unknown (delete)      → releasing
//	                          Done mark draining: conflict (read)             → releasing
//	                          Done draining read: our epoch, < 2 marks (mark again) → releasing
//	                          Done draining read: moved on, or unknown (delete) → releasing
//	                          Deadline fence due                              → fenced-releasing
//
//	fenced-releasing          Done renewal: ok in time (delete)               → releasing
//	                          Done renewal: ok too late (delete)              → fenced-releasing
//	                          Done renewal: ok in time, the epoch to settle (delete) → fenced-releasing
//	                          Done renewal: update conflict (read)            → fenced-releasing
//	                          Done renewal: unknown (delete)                  → fenced-releasing
//	                          Done renewal read: ours (delete at it)          → fenced-releasing
//	                          Done renewal read: free                         → released
//	                          Done renewal: another holder                    → lost
//	                          Done publish: any outcome (delete)              → fenced-releasing
//	                          Done delete: ok or unknown                      → released
//	                          Done delete: conflict (read)                    → fenced-releasing
//	                          Done release read: ours, < 3 deletes (delete)   → fenced-releasing
//	                          Done release read: other, or unknown            → released
//	                          Done epoch call: any outcome (delete)           → fenced-releasing
//
//	evicted-releasing         Done renewal: ok (no restore; delete)           → fenced-releasing
//	                          Done renewal: update conflict (read)            → fenced-releasing
//	                          Done renewal: unknown (delete)                  → fenced-releasing
//	                          Done renewal read: ours (delete at it)          → fenced-releasing
//	                          Done renewal read: free                         → released
//	                          Done renewal: another holder                    → lost
//	                          Done publish: any outcome (delete)              → fenced-releasing
//	                          Done epoch call: any outcome (delete)           → fenced-releasing
//
//	released                  MarkDrained the record marked draining          → marking-drained
//
//	marking-drained           Done mark drained: ok or unknown                → released
//	                          Done mark drained: conflict (read)              → marking-drained
//	                          Done drained read: still ours, < 2 marks (mark again) → marking-drained
//	                          Done drained read: moved on, or unknown         → released
//
//	refused                   Release                                         → released
//
// Invariants (checked after every step; a break is reported like an illegal move):
//
//   - At most one store call is in flight, and only in a sub-state that names one.
//   - Serving implies the last successful renewal (or the write that took the lease) was
//     sent less than lease/2 ago: every step ends with the fence check.
//   - The watch is on exactly while a holder is watched (claim-watching, standby and
//     their calls) and while the lease is ours outside a release (publishing, serving,
//     fenced); it is off while a claim has found no holder to watch yet, while releasing
//     and once the claim or the lease is over. The epoch watch is on exactly while a
//     bump is deferred and the lease is ours outside a release.
//   - Serving is entered only under a settled (or deferred) epoch.
//   - The gate is open only while serving (until lease/2 after the last successful
//     renewal was sent), and after a release entered from serving (drain); it closes
//     the moment serving ends any other way.
//   - A role change is broadcast once per step, for the public state the step ends in
//     (ClaimFailed on entering refused): a step that passes through a state and leaves
//     it again broadcasts only where it ends.
//   - With no call in flight, a Tick at the earliest deadline moves the machine: no
//     deadline is kept that nothing would act on (a driver that arms each timer once
//     would otherwise never wake again).
//   - Lost takes no input; released takes only MarkDrained, and only after a release
//     that marked the record draining; refused takes only Release.
//   - Every move is a row of the table; any other is illegal: it is made (the code, not
//     the table, is what the tests ran), reported as an EventIllegalTransition carrying
//     a *TransitionError, and counted (Illegal).
type Machine struct {
	cfg Config
	sub SubState
	in  Input // the input being handled, for the legality check

	nextID   uint64
	inflight *Op
	sentAt   time.Time // when the call in flight was sent (a renewal's read and create: the renewal's)

	// a holder watched, claiming or standing by
	seen         Record
	seenAt       time.Time     // when we first saw seen.Revision, on our clock
	seenLease    time.Duration // the lease period seen's holder published; 0: none known
	standbyUntil time.Time     // the standby timeout
	retryAt      time.Time     // the retry of a read that failed
	takeSent     time.Time     // when the last create or takeover write was sent
	handoffTake  bool          // that write takes a lease released to us (handoff.go)

	// the lease ours
	rev       uint64
	lastOK    time.Time // when the last successful renewal (or the write that took the lease) was sent
	nextRenew time.Time
	// unpublished: our period is not known to be in the store (the last publish failed,
	// or the lease was created again); publish it after the next renewal. A fact about
	// the store, as rev is, not a place in the table.
	unpublished     bool
	releaseAttempts int
	// handTo is whom a release from serving hands the lease to (the released-to form of
	// handoff.go, instead of a delete); zero: nobody, delete it. Set by HandTo.
	handTo Target

	// the epoch (settle.go), facts about the epoch record as rev is about the lease
	epoch       uint64      // the epoch we serve under; 0: none settled yet
	epochRec    EpochRecord // the record as we last read or wrote it
	due         epochDue    // what the epoch still needs
	takenAt     time.Time   // when the write that last took the lease was sent
	tookOver    bool        // that write took over a silent holder
	takeUpdate  bool        // the last claim write sent was a takeover (for a take a read finds)
	bumpAt      time.Time   // holding: when the deferred bump (or a settle tried again) is due
	floor       uint64      // the newest epoch a data store was found holding (StoreAhead)
	recordFound bool        // the last settle read an epoch record (StoreAhead says whether it was lost)
	tampered    error       // a *StoreAheadError while the lease is ours: a store was written by hand
	tried       uint64      // the epoch of a write of ours whose outcome is unknown
	epochWrites int         // the compare-and-swaps of the settle in progress
	markSent    bool        // the release marked, or tried to mark, the record draining
	marked      bool        // the record says draining under our epoch (at epochRec.Revision)
	marks       int         // the writes of the mark in progress

	err    error  // refused: why
	lostTo Holder // lost: to whom

	illegal     uint64
	lastIllegal error
}

// NewMachine returns a machine in StateIdle (sub-state unstarted).
func NewMachine(cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Machine{cfg: cfg, sub: unstarted}, nil
}

// Config is the machine's configuration.
func (m *Machine) Config() Config { return m.cfg }

// HandTo makes the next release from serving a directed handover to t: the release
// compare-and-swaps the lease to its released-to form (handoff.go) where it would
// delete it. A zero t undoes it. It moves nothing by itself; a release from fenced
// still deletes (a holder not surely serving names no successor).
func (m *Machine) HandTo(t Target) { m.handTo = t }

// HandingTo is the target a release would hand the lease to.
func (m *Machine) HandingTo() Target { return m.handTo }

// State is the current public state.
func (m *Machine) State() State { return m.sub.State() }

// SubState is the current sub-state.
func (m *Machine) SubState() SubState { return m.sub }

// Revision is our revision while the lease is ours (serving, fenced, publishing our
// period, releasing it), else 0.
func (m *Machine) Revision() uint64 {
	if m.sub.ended() {
		return 0
	}
	return m.rev
}

// LastRenewed is when the last successful renewal (or the claim) was sent.
func (m *Machine) LastRenewed() time.Time { return m.lastOK }

// Err is the error the claim ended with, if it did.
func (m *Machine) Err() error { return m.err }

// Seen is the other holder's record while claiming or standing by.
func (m *Machine) Seen() Record { return m.seen }

// Watching reports whether the driver should watch the lease and call Observe: while
// claiming or standing by, to see the holder renew or release, and while holding, to
// see any write that is not ours (docs/design.md §4.1). Never during a release: our own delete
// must not look like an eviction.
func (m *Machine) Watching() bool { return m.sub.attrs().watch }

// InFlight is the call the machine waits for, if any.
func (m *Machine) InFlight() *Op { return m.inflight }

// Illegal is how many moves (or broken invariants) the table did not allow, and the
// last one. A test fails on any.
func (m *Machine) Illegal() (uint64, error) { return m.illegal, m.lastIllegal }

// Deadlines reports when Tick is next needed.
func (m *Machine) Deadlines() Deadlines {
	var d Deadlines
	a := m.sub.attrs()
	if a.renews {
		d.Renew = m.nextRenew
	}
	if a.state == StateServing && m.fences() {
		d.Fence = m.fenceAt()
	}
	if a.takeover {
		d.Takeover = m.takeoverAt()
	}
	if a.standbyTimeout {
		d.Standby = m.standbyUntil
	}
	if a.retries {
		d.Retry = m.retryAt
	}
	if m.sub == holding && m.due != epochSettled {
		d.Epoch = m.bumpAt
	}
	return d
}

// Role is the role the machine is in now, as a broadcast to a new subscriber; RoleNone
// while claiming.
func (m *Machine) Role() Role { return m.roleOf(m.sub, 0) }

func (m *Machine) roleOf(s SubState, from State) Role {
	switch s.State() {
	case StateServing:
		return Role{Kind: RoleServing, Revision: m.rev, Epoch: m.epoch, Restored: from == StateFenced, Shared: m.due == epochDeferred}
	case StateStandby:
		return Role{Kind: RoleStandingBy, Holder: m.seen.Holder}
	case StateFenced:
		return Role{Kind: RoleFenced}
	case StateLost:
		return Role{Kind: RoleLost, Holder: m.lostTo}
	case StateReleased:
		return Role{Kind: RoleReleased}
	}
	if s == refused {
		return Role{Kind: RoleClaimFailed, Err: m.err}
	}
	return Role{}
}

// fenceAt is when a holder that cannot renew stops serving.
func (m *Machine) fenceAt() time.Time { return m.lastOK.Add(m.cfg.FenceAfter()) }

// fences reports whether the machine fences on its own clock: always, but with the
// fail point skip-fencing (the gate still closes at fenceAt).
func (m *Machine) fences() bool { return !failpoint.On(m.cfg.Failpoints, failpoint.SkipFencing) }

// takeoverAt is when the holder we watch has been silent long enough to be taken over:
// the longer of our lease period and the one it published, after we first saw its
// revision.
func (m *Machine) takeoverAt() time.Time {
	return m.seenAt.Add(max(m.cfg.Lease, m.seenLease))
}
