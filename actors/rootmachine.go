package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/lease"
)

// Phase is where the root stands in the handover cascade.
type Phase int

// The phases, in the order the cascade goes through them.
const (
	// PhaseRelaying: no handover asked for; the root relays role changes to the members.
	PhaseRelaying  Phase = iota + 1
	PhaseJobs            // jobs stop; runs in progress finish
	PhaseRelease         // the lease is released
	PhaseSuccessor       // we serve on until the new holder answers at the broker
	PhaseDrain           // shared subscriptions end; received calls and sessions finish
	PhaseSessions        // the second wait for sessions
	PhaseStop            // everything left is stopped
	PhaseDrained         // the epoch record is marked drained
	PhaseDone            // the handover is over: Ended is closed
)

var phaseNames = [...]string{
	PhaseRelaying:  "relaying",
	PhaseJobs:      "jobs",
	PhaseRelease:   "release",
	PhaseSuccessor: "successor",
	PhaseDrain:     "drain",
	PhaseSessions:  "sessions",
	PhaseStop:      "stop",
	PhaseDrained:   "drained",
	PhaseDone:      "done",
}

func (p Phase) String() string {
	if p >= PhaseRelaying && p <= PhaseDone {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// stopBound bounds the wait for members to confirm Stop: a member that never answers
// must not hold the process forever.
const stopBound = 5 * time.Second

// serveRetry is the pause before a member that failed to serve is told Serve again.
const serveRetry = 500 * time.Millisecond

// HandoverMachine is the root's role state as a transition function, beside the lease's
// Machine: each input (a role broadcast of the ownership, a member's reply, a timer that
// fired, a wait that returned) moves it, and Step returns the HandoverOutput that says
// everything the root actor must do. It does no I/O, reads no clock (the driver passes
// now) and starts no goroutine, so the same state and input give the same output. It
// is not safe for concurrent use: the root actor owns it.
//
// It knows the ownership only from the role broadcasts it is fed: the state the last
// one told (owner) stands for the ownership's status. The ownership's StatusChanged it
// keeps only to publish it with the phase (the root's one view); it moves nothing.
//
// The handover phases move by the table below (an input not listed for a phase leaves
// it as it is). "Over" is a phase that began with nothing to wait for (no jobs, no
// member, drain_seconds 0, a lease already gone, a bound of zero), over in the step
// that began it; the phase after it begins in the same step. The fail point
// release-before-jobs reorders the phases: release first, jobs after the sessions.
//
//	relaying    Handover a jobs host                                      → jobs
//	            Handover no jobs host                                     → release
//	            Handover fail point release-before-jobs                   → release
//
//	jobs        Drained the jobs host's                                   → release
//	            Deadline the runs returned, or the lease not ours to keep → release
//	            Deadline a run has not returned, the lease ours           → jobs
//	            Drained the jobs host's, release-before-jobs              → stop
//	            Deadline release-before-jobs                              → stop
//
//	release     Released a successor check                                → successor
//	            Released no successor check                               → drain
//	            Deadline a successor check                                → successor
//	            Deadline no successor check                               → drain
//	            Lost a successor check                                    → successor
//	            Lost no successor check                                   → drain
//	            Over nothing to release, a successor check                → successor
//	            Over nothing to release, no successor check               → drain
//
//	successor   Over no bound, member, release or standby                 → drain
//	            SuccessorDone                                             → drain
//	            RollCall none stands by                                   → drain
//	            Deadline                                                  → drain
//
//	drain       Over no member, or drain_seconds 0                        → sessions
//	            Drained the last member's                                 → sessions
//	            Deadline                                                  → sessions
//
//	sessions    Over no wait, or past the drain deadline                  → stop
//	            SessionsDone                                              → stop
//	            Deadline                                                  → stop
//	            Over release-before-jobs, a jobs host                     → jobs
//	            SessionsDone release-before-jobs, a jobs host             → jobs
//	            Deadline release-before-jobs, a jobs host                 → jobs
//
//	stop        Over no member and no jobs host                           → drained
//	            Down the last                                             → drained
//	            Deadline                                                  → drained
//
//	drained     DrainMarked                                               → done
//	            Deadline                                                  → done
//
// The role relay (relaying, and the fence during a handover) moves no phase:
//
//	Serving      → Serve{Epoch} to every member and the jobs host; waits for
//	               Accepting{On: true} from each (ServeFailed: Serve again after
//	               serveRetry), then State is serving. Serving{Restored} after a fence is
//	               the same. Ignored once a handover has begun.
//	EpochChanged → Serve{Epoch} again to every member and the jobs host, serving already:
//	               each adopts the new epoch and confirms it, as for Serving (State
//	               stays serving meanwhile). Ignored unless serving, and once a handover
//	               has begun.
//	StandingBy   → nothing to tell; State is standby.
//	Fenced       → Stop to every member and the jobs host, at once; no reply awaited.
//	Lost         → Stop to every member and the jobs host; the engine ends with a
//	               *lease.LostError, unless a handover runs (it goes on to its end; in
//	               the release phase at once, as no Released will come).
//	ClaimFailed  → the engine ends with the claim's error: it will never serve.
//	Released     → State is released; the handover's release phase moves on.
type HandoverMachine struct {
	cfg handoverConfig

	phase      Phase
	phaseStart time.Time
	deadline   time.Time       // the current phase's; zero for none
	waiting    map[string]bool // members (PID strings) the current phase waits for
	drainBy    time.Time       // the drain deadline, which the second wait for sessions keeps
	released   time.Time       // when the release was confirmed (the drain deadline counts from it)
	standbys   standbyCount    // what the roll call at the handover's start found

	// owner is the ownership's state as its last role broadcast told it.
	owner lease.State
	// status is the ownership's status as its last StatusChanged told it, for the view.
	status Status

	// the serving period: Serve was sent, and these members have not confirmed it yet
	state     lease.State // what the members carry out (serving once all confirmed)
	up        bool        // every member confirmed the current period's Serve
	upWaiting map[string]bool
	served    uint64 // serving periods confirmed so far
	epoch     uint64 // the epoch the members were last told to serve under
	shared    bool   // it is a draining engine's (Serve.Shared)
	revision  uint64 // the lease revision of the last Serving, for the handover's log lines
	failing   failing
	failGen   uint64 // bumped on every change of failing, so the view sees it

	ended bool
	err   error

	in      HandoverInput // the input of the step under way, for its moves
	illegal int           // moves the table does not allow, so far
}

// handoverConfig is what the machine sequences; it never changes.
type handoverConfig struct {
	ownership *actor.PID
	jobs      *actor.PID
	members   []*actor.PID
	drain     time.Duration
	lease     lease.Config
	// which optional waits the driver can run
	successor, sessions, rollCall bool
	faults                        handoverFaults
}

// handoverFaults are the fail points the cascade obeys (failpoints.go); all false
// without the build tag failpoints.
type handoverFaults struct {
	releaseBeforeJobs, serveAfterRelease, skipSuccessor bool
}

func newHandoverMachine(cfg handoverConfig) *HandoverMachine {
	return &HandoverMachine{cfg: cfg, phase: PhaseRelaying, state: lease.StateIdle}
}

// HandoverOutput is everything one step asks of the root actor, to be carried out in
// this order: log the lines, report the phases left, stop the Serve retries, send the
// messages, arm the retries and the held messages, start the waits, arm the phase
// deadline, and end the engine.
type HandoverOutput struct {
	Moves []PhaseMove
	// Illegal are the moves of Moves the table does not allow (*PhaseMoveError): log them.
	Illegal []error
	Logs    []LogLine
	Phases  []PhaseTime // the phases left, with how long each lasted (RootConfig.OnPhase)
	// StopRetries stops every Serve retry armed.
	StopRetries bool
	Sends       []Send
	Retries     []Retry
	Held        []Held
	Waits       []WaitStart
	// Deadline is the current phase's deadline after the step: arm the phase timer at
	// it, for Phase (zero At: none).
	Deadline PhaseDeadline
	// End: the engine ends, with Err (nil after a handover).
	End bool
	Err error
}

// PhaseMove is one move of the handover: a row of the table above HandoverMachine.
type PhaseMove struct {
	From, To Phase
	Input    HandoverInput
}

// LogLine is a line the root logs.
type LogLine struct {
	Level  zapcore.Level
	Msg    string
	Fields []zap.Field
}

// PhaseTime is a phase left and how long it lasted.
type PhaseTime struct {
	Phase Phase
	D     time.Duration
}

// Send is a message to send, from the root.
type Send struct {
	To  *actor.PID
	Msg any
}

// Retry tells member To Serve again at At (the driver feeds retryServe then).
type Retry struct {
	To *actor.PID
	At time.Time
}

// Held is a message a fail point holds back until At (failpoints.go).
type Held struct {
	At  time.Time
	Msg any
	To  []*actor.PID
}

// WaitKind is a wait the driver runs on a goroutine of its own.
type WaitKind uint8

const (
	WaitRollCall  WaitKind = iota + 1 // RootConfig.AnyStandby; reports rollCallDone
	WaitSuccessor                     // the next holder, then RootConfig.Successor; reports successorDone
	WaitSessions                      // RootConfig.Sessions; reports sessionsDone
)

// WaitStart starts a wait, bounded by Deadline.
type WaitStart struct {
	Kind     WaitKind
	Deadline time.Time
}

// PhaseDeadline is when the phase timer fires, for which phase.
type PhaseDeadline struct {
	Phase Phase
	At    time.Time
}

// Messages the root's timers and goroutines feed back: a phase's deadline, a Serve to
// retry, and what each wait returned.
type (
	phaseDeadline struct{ phase Phase }
	sessionsDone  struct{ err error }
	successorDone struct {
		holder lease.Holder // the new holder, when the lease showed one
		err    error
	}
	rollCallDone struct {
		any bool
		err error
	}
	retryServe struct{ to *actor.PID }
)

func (o *HandoverOutput) log(l zapcore.Level, msg string, fields ...zap.Field) {
	o.Logs = append(o.Logs, LogLine{Level: l, Msg: msg, Fields: fields})
}

func (o *HandoverOutput) send(to *actor.PID, msg any) {
	o.Sends = append(o.Sends, Send{To: to, Msg: msg})
}

// Step feeds the machine one input, received at now: a role broadcast (Serving,
// EpochChanged, StandingBy, Fenced, Lost, Released, ClaimFailed), the ownership's
// StatusChanged, a member's reply (Accepting, ServeFailed, Drained, Down), the
// ownership's DrainMarked, Handover, or what a timer or a wait of the root's reported.
// Anything else asks nothing.
func (m *HandoverMachine) Step(now time.Time, msg any) HandoverOutput {
	var out HandoverOutput
	m.in = inputOf(msg)
	switch msg := msg.(type) {
	case Serving, EpochChanged, StandingBy, Fenced, Lost, Released, ClaimFailed:
		m.roleChanged(&out, now, msg)
	case StatusChanged:
		m.status = msg.Status
	case Accepting:
		if msg.On {
			m.accepted(msg.From)
			if msg.From != nil && m.failing[msg.From.String()].Member != "" {
				m.failing.served(msg.From)
				m.failGen++
			}
		}
	case ServeFailed:
		m.serveFailed(&out, now, msg)
	case retryServe:
		if m.phase == PhaseRelaying && m.owner == lease.StateServing {
			out.send(msg.to, Serve{Epoch: m.epoch, Shared: m.shared})
		}
	case Handover, Drained, Down, DrainMarked, phaseDeadline, sessionsDone, successorDone, rollCallDone:
		m.handover(&out, now, msg)
	}
	out.Deadline = m.Deadline()
	return out
}

// Deadline is the current phase's deadline; a driver restarted arms it again.
func (m *HandoverMachine) Deadline() PhaseDeadline {
	if m.deadline.IsZero() || m.phase == PhaseRelaying || m.phase == PhaseDone {
		return PhaseDeadline{}
	}
	return PhaseDeadline{Phase: m.phase, At: m.deadline}
}

// Phase is the handover phase the machine is in.
func (m *HandoverMachine) Phase() Phase { return m.phase }

// roleChanged relays a role change of the ownership to the members (the table's second
// part, above HandoverMachine).
func (m *HandoverMachine) roleChanged(out *HandoverOutput, now time.Time, msg any) {
	switch msg := msg.(type) {
	case Serving:
		m.owner = lease.StateServing
		if m.phase != PhaseRelaying {
			return
		}
		out.log(zapcore.InfoLevel, "serving", zap.Uint64("revision", msg.Revision), zap.Uint64("epoch", msg.Epoch), zap.Bool("restored", msg.Restored))
		m.epoch, m.shared, m.revision = msg.Epoch, msg.Shared, msg.Revision
		m.expectUp(out)
		m.fanOut(out, Serve{Epoch: msg.Epoch, Shared: msg.Shared}, true)
	case EpochChanged:
		m.owner = lease.StateServing
		if m.phase != PhaseRelaying || (!m.up && m.upWaiting == nil) {
			return
		}
		out.log(zapcore.InfoLevel, "serving under a new epoch", zap.Uint64("epoch", msg.Epoch))
		m.epoch, m.shared = msg.Epoch, false // a bump of our own
		m.expectUp(out)
		m.fanOut(out, Serve{Epoch: msg.Epoch}, true)
	case StandingBy:
		m.owner = lease.StateStandby
		m.state = lease.StateStandby
		m.clearFailing()
	case Fenced:
		m.owner = lease.StateFenced
		m.notUp(out, lease.StateFenced)
		m.fanOut(out, Stop{}, true)
	case Lost:
		m.owner = lease.StateLost
		m.notUp(out, lease.StateLost)
		m.fanOut(out, Stop{}, true)
		if m.phase == PhaseRelaying {
			m.end(out, &lease.LostError{Holder: msg.Holder})
		}
		m.handover(out, now, msg)
	case ClaimFailed:
		// The root exists once the claim stood by (or served): a claim that ends now is
		// a standby's, timed out or beaten to a released lease by an engine of its own
		// rollout. Either way it will never serve: end, as a refused engine does.
		m.owner = lease.StateIdle
		m.end(out, msg.Err)
	case Released:
		m.owner = lease.StateReleased
		m.notUp(out, lease.StateReleased)
		m.handover(out, now, msg)
	}
}

// expectUp starts a serving period: every member and the jobs host must confirm Serve.
func (m *HandoverMachine) expectUp(out *HandoverOutput) {
	out.StopRetries = true // the Serve that follows reaches every member
	m.up = false
	m.upWaiting = map[string]bool{}
	for _, pid := range m.members(true) {
		m.upWaiting[pid.String()] = true
	}
	if len(m.upWaiting) == 0 {
		m.upNow()
	}
}

// accepted counts a member's confirmation of the period's Serve.
func (m *HandoverMachine) accepted(from *actor.PID) {
	if from == nil || !m.upWaiting[from.String()] {
		return
	}
	delete(m.upWaiting, from.String())
	if len(m.upWaiting) == 0 {
		m.upNow()
	}
}

func (m *HandoverMachine) upNow() {
	m.up, m.upWaiting, m.state = true, nil, lease.StateServing
	m.served++
}

// notUp ends a serving period: the members were told to stop, so the engine no longer
// serves, and confirmations of the period's Serve no longer count.
func (m *HandoverMachine) notUp(out *HandoverOutput, s lease.State) {
	m.state, m.up, m.upWaiting = s, false, nil
	out.StopRetries = true
	m.clearFailing()
}

// serveFailed tells the member Serve again after a pause: a broker that is away comes
// back, and a fence or a handover meanwhile makes the retry moot.
func (m *HandoverMachine) serveFailed(out *HandoverOutput, now time.Time, msg ServeFailed) {
	if msg.From == nil {
		return
	}
	// Once per run of failures with one error: the retry every serveRetry would
	// otherwise log twice a second for as long as the member cannot serve.
	prev, again := m.failing[msg.From.String()]
	if again && prev.Err != nil && msg.Err != nil && prev.Err.Error() == msg.Err.Error() {
		out.log(zapcore.DebugLevel, "a member could not serve; retrying", zap.Stringer("member", msg.From), zap.Error(msg.Err))
	} else {
		out.log(zapcore.WarnLevel, "a member could not serve; retrying", zap.Stringer("member", msg.From), zap.Error(msg.Err))
	}
	if m.phase == PhaseRelaying && m.owner == lease.StateServing {
		// The holder cannot serve this member's calls: not ready (Failing).
		m.failing.fail(msg.From, msg.Err, now)
		m.failGen++
	}
	if stale := (*epoch.StaleError)(nil); errors.As(msg.Err, &stale) && stale.Current >= m.epoch {
		// A store at our epoch refuses it only when we took it as new (epoch.Taken): the
		// ownership says whether its record was lost or the store was written by hand.
		out.log(zapcore.WarnLevel, "a data store refused this engine's epoch; the ownership goes past the store's",
			zap.String("store", stale.Store), zap.Uint64("store_epoch", stale.Current), zap.Uint64("epoch", m.epoch))
		out.send(m.cfg.ownership, StoreAhead{Epoch: stale.Current})
	}
	out.Retries = append(out.Retries, Retry{To: msg.From, At: now.Add(serveRetry)})
}

func (m *HandoverMachine) end(out *HandoverOutput, err error) {
	if m.ended {
		return
	}
	m.ended, m.err = true, err
	out.End, out.Err = true, err
}

// clearFailing forgets the failing members: the members were told to stop, or the
// engine stands by, so nothing is expected of them.
func (m *HandoverMachine) clearFailing() {
	if len(m.failing) > 0 {
		clear(m.failing)
		m.failGen++
	}
}

func (m *HandoverMachine) members(withJobs bool) []*actor.PID {
	pids := append([]*actor.PID(nil), m.cfg.members...)
	if withJobs && m.cfg.jobs != nil {
		pids = append(pids, m.cfg.jobs)
	}
	return pids
}

func (m *HandoverMachine) fanOut(out *HandoverOutput, msg any, withJobs bool) {
	for _, pid := range m.members(withJobs) {
		out.send(pid, msg)
	}
}

// rootView is the snapshot the handles read.
type rootView struct {
	lease  Status // the ownership's, as the root last heard it
	phase  Phase
	state  lease.State
	up     bool
	served uint64
	epoch  uint64
	ended  bool
	err    error
	// failing is the members that could not serve (Failing); failGen its version.
	failing []MemberFailure
	failGen uint64
}

// view is what the root publishes; failing is listed only when failGen moved past old's.
func (m *HandoverMachine) view(old rootView) rootView {
	v := rootView{lease: m.status, phase: m.phase, state: m.state, up: m.up, served: m.served, epoch: m.epoch,
		ended: m.ended, err: m.err, failGen: m.failGen, failing: old.failing}
	if v.failGen != old.failGen {
		v.failing = m.failing.list()
	}
	return v
}
