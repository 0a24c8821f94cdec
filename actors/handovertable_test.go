package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/abi-engine/engine/internal/fsmtable/fsmtabletest"
	"github.com/abi-engine/engine/lease"
)

// The handover machine's fixture: pure, no actor engine and no broker. PIDs are plain
// values; nothing is ever sent to them.
var (
	hmOwner = actor.NewPID("local", "ownership")
	hmJobs  = actor.NewPID("local", "jobs")
	hmP1    = actor.NewPID("local", "primary/p1")
	hmP2    = actor.NewPID("local", "primary/p2")
	hmT0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

const hmLease = 4 * time.Second

// hcfg is a fixture's configuration: every option on, unless a scenario turns it off.
type hcfg struct {
	noJobs, noMembers, noSuccessor, noSessions, noRollCall bool
	drain                                                  time.Duration // 0: 10 s
	noDrain                                                bool          // drain_seconds 0
	faults                                                 handoverFaults
}

// hm is a handover machine on a virtual clock, driven input by input.
type hm struct {
	t   *testing.T
	m   *HandoverMachine
	now time.Time
}

func newHM(t *testing.T, c hcfg) *hm {
	cfg := handoverConfig{ownership: hmOwner, jobs: hmJobs, members: []*actor.PID{hmP1, hmP2}, drain: 10 * time.Second,
		lease: lease.Config{Lease: hmLease}, successor: !c.noSuccessor, sessions: !c.noSessions, rollCall: !c.noRollCall,
		faults: c.faults}
	if c.noJobs {
		cfg.jobs = nil
	}
	if c.noMembers {
		cfg.members = nil
	}
	if c.drain != 0 {
		cfg.drain = c.drain
	}
	if c.noDrain {
		cfg.drain = 0
	}
	return &hm{t: t, m: newHandoverMachine(cfg), now: hmT0}
}

func (f *hm) step(msg any) HandoverOutput {
	f.t.Helper()
	out := f.m.Step(f.now, msg)
	for _, err := range out.Illegal {
		f.t.Errorf("step %T: %v", msg, err)
	}
	return out
}

// deadline lets the current phase's deadline pass.
func (f *hm) deadline() HandoverOutput {
	d := f.m.Deadline()
	if d.At.IsZero() {
		f.t.Fatalf("no deadline in %s", f.m.Phase())
	}
	f.now = d.At
	return f.step(phaseDeadline{phase: d.Phase})
}

// each sends msg from every pid in turn; the output is the last step's.
func (f *hm) each(msg func(*actor.PID) any, pids ...*actor.PID) HandoverOutput {
	var out HandoverOutput
	for _, p := range pids {
		out = f.step(msg(p))
	}
	return out
}

func drained(p *actor.PID) any { return Drained{From: p} }
func down(p *actor.PID) any    { return Down{From: p} }
func accepted(p *actor.PID) any {
	return Accepting{From: p, On: true}
}

// serve makes the engine serve: Serving, then every member and the jobs host confirm.
func (f *hm) serve() *hm {
	f.step(Serving{Revision: 7, Epoch: 3})
	f.each(accepted, f.m.members(true)...)
	return f
}

// hmPaths drive a machine from serving to each phase of the normal order, by the
// phase before it (with every option on).
func hmPaths() map[Phase]func(f *hm) {
	return map[Phase]func(f *hm){
		PhaseRelaying:  func(f *hm) { f.serve() },
		PhaseJobs:      func(f *hm) { f.via(PhaseRelaying).step(Handover{}) },
		PhaseRelease:   func(f *hm) { f.via(PhaseJobs).step(Drained{From: hmJobs}) },
		PhaseSuccessor: func(f *hm) { f.via(PhaseRelease).step(Released{}) },
		PhaseDrain:     func(f *hm) { f.via(PhaseSuccessor).step(successorDone{holder: lease.Holder{InstanceID: "b"}}) },
		PhaseSessions:  func(f *hm) { f.via(PhaseDrain).each(drained, hmP1, hmP2) },
		PhaseStop:      func(f *hm) { f.via(PhaseSessions).step(sessionsDone{}) },
		PhaseDrained:   func(f *hm) { f.via(PhaseStop).each(down, hmP1, hmP2, hmJobs) },
		PhaseDone:      func(f *hm) { f.via(PhaseDrained).step(DrainMarked{}) },
	}
}

// via drives f to p by its path and checks it got there.
func (f *hm) via(p Phase) *hm {
	f.t.Helper()
	hmPaths()[p](f)
	if f.m.Phase() != p {
		f.t.Fatalf("the path to %s ended in %s", p, f.m.Phase())
	}
	return f
}

// rbj reaches the jobs phase with release-before-jobs: after the sessions.
func rbj(t *testing.T) *hm {
	f := newHM(t, hcfg{faults: handoverFaults{releaseBeforeJobs: true}})
	f.serve().step(Handover{})
	f.step(Released{})
	f.step(successorDone{})
	f.each(drained, hmP1, hmP2)
	if f.m.Phase() != PhaseSessions {
		f.t.Fatalf("release-before-jobs: in %s, want sessions", f.m.Phase())
	}
	return f
}

// hmScenario gives a row's input on fresh machines, once per case of its condition.
type hmScenario func(t *testing.T) []HandoverOutput

// from runs in on a fresh machine of c driven to p.
func from(c hcfg, p Phase, in func(f *hm) HandoverOutput) hmScenario {
	return func(t *testing.T) []HandoverOutput { return []HandoverOutput{in(newHM(t, c).via(p))} }
}

func cases(scs ...hmScenario) hmScenario {
	return func(t *testing.T) []HandoverOutput {
		var outs []HandoverOutput
		for _, sc := range scs {
			outs = append(outs, sc(t)...)
		}
		return outs
	}
}

func hmRows() map[phaseRow]hmScenario {
	all, noJobs, noSucc := hcfg{}, hcfg{noJobs: true}, hcfg{noSuccessor: true}
	key := func(from Phase, in HandoverInput, when string, to Phase) phaseRow {
		return phaseRow{From: from, In: in, When: when, To: to}
	}
	msg := func(m any) func(f *hm) HandoverOutput { return func(f *hm) HandoverOutput { return f.step(m) } }
	dl := (*hm).deadline
	then := func(prep any, in func(f *hm) HandoverOutput) func(f *hm) HandoverOutput {
		return func(f *hm) HandoverOutput { f.step(prep); return in(f) }
	}
	lostThenJobs := then(Lost{Holder: lease.Holder{InstanceID: "thief"}}, msg(Drained{From: hmJobs}))
	rbjRun := func(in func(f *hm) HandoverOutput) hmScenario {
		return func(t *testing.T) []HandoverOutput { return []HandoverOutput{in(rbj(t))} }
	}
	rbjNoSessions := func(t *testing.T) []HandoverOutput {
		f := newHM(t, hcfg{noSessions: true, faults: handoverFaults{releaseBeforeJobs: true}})
		f.serve().step(Handover{})
		f.step(Released{})
		f.step(successorDone{})
		return []HandoverOutput{f.each(drained, hmP1, hmP2)}
	}
	rbjJobs := func(in func(f *hm) HandoverOutput) hmScenario {
		return func(t *testing.T) []HandoverOutput {
			f := rbj(t)
			f.step(sessionsDone{})
			return []HandoverOutput{in(f)}
		}
	}
	// the successor phase reached with nothing to wait for
	overSuccessor := cases(
		from(hcfg{noDrain: true}, PhaseRelease, msg(Released{})),   // no bound
		from(hcfg{noMembers: true}, PhaseRelease, msg(Released{})), // no member
		from(all, PhaseRelease, dl),                                // no release: the lease still ours
		from(all, PhaseJobs, then(rollCallDone{any: false}, func(f *hm) HandoverOutput { // none stands by
			f.step(Drained{From: hmJobs})
			return f.step(Released{})
		})),
		from(hcfg{faults: handoverFaults{skipSuccessor: true}}, PhaseRelease, msg(Released{})),
	)
	return map[phaseRow]hmScenario{
		key(PhaseRelaying, InputHandover, "a jobs host", PhaseJobs):                       from(all, PhaseRelaying, msg(Handover{})),
		key(PhaseRelaying, InputHandover, "no jobs host", PhaseRelease):                   from(noJobs, PhaseRelaying, msg(Handover{})),
		key(PhaseRelaying, InputHandover, "fail point release-before-jobs", PhaseRelease): from(hcfg{faults: handoverFaults{releaseBeforeJobs: true}}, PhaseRelaying, msg(Handover{})),
		key(PhaseJobs, InputDrained, "the jobs host's", PhaseRelease):                     from(all, PhaseJobs, msg(Drained{From: hmJobs})),
		key(PhaseJobs, InputDeadline, "the runs returned, or the lease not ours to keep", PhaseRelease): cases(
			from(all, PhaseJobs, then(Lost{Holder: lease.Holder{InstanceID: "thief"}}, dl)),
			from(all, PhaseJobs, then(Released{}, dl)),
		),
		key(PhaseJobs, InputDeadline, "a run has not returned, the lease ours", PhaseJobs): cases(
			from(all, PhaseJobs, dl), from(all, PhaseJobs, then(Fenced{}, dl)),
		),
		key(PhaseJobs, InputDrained, "the jobs host's, release-before-jobs", PhaseStop): rbjJobs(msg(Drained{From: hmJobs})),
		key(PhaseJobs, InputDeadline, "release-before-jobs", PhaseStop):                 rbjJobs(dl),

		key(PhaseRelease, InputReleased, "a successor check", PhaseSuccessor):                 from(all, PhaseRelease, msg(Released{})),
		key(PhaseRelease, InputReleased, "no successor check", PhaseDrain):                    from(noSucc, PhaseRelease, msg(Released{})),
		key(PhaseRelease, InputDeadline, "a successor check", PhaseSuccessor):                 from(all, PhaseRelease, dl),
		key(PhaseRelease, InputDeadline, "no successor check", PhaseDrain):                    from(noSucc, PhaseRelease, dl),
		key(PhaseRelease, InputLost, "a successor check", PhaseSuccessor):                     from(all, PhaseRelease, msg(Lost{Holder: lease.Holder{InstanceID: "thief"}})),
		key(PhaseRelease, InputLost, "no successor check", PhaseDrain):                        from(noSucc, PhaseRelease, msg(Lost{Holder: lease.Holder{InstanceID: "thief"}})),
		key(PhaseRelease, InputOver, "nothing to release, a successor check", PhaseSuccessor): from(all, PhaseJobs, lostThenJobs),
		key(PhaseRelease, InputOver, "nothing to release, no successor check", PhaseDrain):    from(noSucc, PhaseJobs, lostThenJobs),
		key(PhaseSuccessor, InputOver, "no bound, member, release or standby", PhaseDrain):    overSuccessor,
		key(PhaseSuccessor, InputSuccessorDone, "", PhaseDrain): cases(
			from(all, PhaseSuccessor, msg(successorDone{holder: lease.Holder{InstanceID: "b"}})),
			from(all, PhaseSuccessor, msg(successorDone{err: errors.New("no INFO")})),
			from(all, PhaseSuccessor, msg(successorDone{err: context.DeadlineExceeded})),
		),
		key(PhaseSuccessor, InputRollCall, "none stands by", PhaseDrain): from(all, PhaseSuccessor, msg(rollCallDone{any: false})),
		key(PhaseSuccessor, InputDeadline, "", PhaseDrain):               from(all, PhaseSuccessor, dl),

		key(PhaseDrain, InputOver, "no member, or drain_seconds 0", PhaseSessions): cases(
			from(hcfg{noMembers: true}, PhaseRelease, msg(Released{})),
			from(hcfg{noDrain: true}, PhaseRelease, msg(Released{})),
		),
		key(PhaseDrain, InputDrained, "the last member's", PhaseSessions): from(all, PhaseDrain, func(f *hm) HandoverOutput { return f.each(drained, hmP1, hmP2) }),
		key(PhaseDrain, InputDeadline, "", PhaseSessions):                 from(all, PhaseDrain, dl),

		key(PhaseSessions, InputOver, "no wait, or past the drain deadline", PhaseStop): cases(
			from(hcfg{noSessions: true}, PhaseDrain, func(f *hm) HandoverOutput { return f.each(drained, hmP1, hmP2) }),
			from(all, PhaseDrain, dl), // the drain deadline passed: the sessions' too
		),
		key(PhaseSessions, InputSessionsDone, "", PhaseStop): cases(
			from(all, PhaseSessions, msg(sessionsDone{})),
			from(all, PhaseSessions, msg(sessionsDone{err: errors.New("a session open")})),
		),
		key(PhaseSessions, InputDeadline, "", PhaseStop):                                     from(all, PhaseSessions, dl),
		key(PhaseSessions, InputOver, "release-before-jobs, a jobs host", PhaseJobs):         rbjNoSessions,
		key(PhaseSessions, InputSessionsDone, "release-before-jobs, a jobs host", PhaseJobs): rbjRun(msg(sessionsDone{})),
		key(PhaseSessions, InputDeadline, "release-before-jobs, a jobs host", PhaseJobs):     rbjRun(dl),

		key(PhaseStop, InputOver, "no member and no jobs host", PhaseDrained): from(hcfg{noMembers: true, noJobs: true, noSessions: true}, PhaseRelaying, then(Handover{}, msg(Released{}))),
		key(PhaseStop, InputDown, "the last", PhaseDrained):                   from(all, PhaseStop, func(f *hm) HandoverOutput { return f.each(down, hmP1, hmP2, hmJobs) }),
		key(PhaseStop, InputDeadline, "", PhaseDrained):                       from(all, PhaseStop, dl),

		key(PhaseDrained, InputDrainMarked, "", PhaseDone): from(all, PhaseDrained, msg(DrainMarked{})),
		key(PhaseDrained, InputDeadline, "", PhaseDone):    from(all, PhaseDrained, dl),
	}
}

// TestHandoverTransitionTable drives every row of the handover's table: each case of
// its condition, on a fresh machine, makes the move the row lists (the first move out
// of the row's phase on its input), and no move the table lacks.
func TestHandoverTransitionTable(t *testing.T) {
	rows := hmRows()
	if len(rows) != len(phaseTable.Rows()) {
		t.Errorf("%d scenarios for %d rows", len(rows), len(phaseTable.Rows()))
	}
	for _, row := range phaseTable.Rows() {
		t.Run(fmt.Sprintf("%s %s %s", row.From, row.In, row.When), func(t *testing.T) {
			sc := rows[row]
			if sc == nil {
				t.Fatal("no scenario for this row")
			}
			for i, out := range sc(t) {
				var got *PhaseMove
				for _, mv := range out.Moves {
					if mv.From == row.From && mv.Input == row.In {
						got = &mv
						break
					}
				}
				want := PhaseMove{From: row.From, To: row.To, Input: row.In}
				if got == nil || *got != want {
					t.Errorf("case %d: moves %v, want %v", i, out.Moves, want)
				}
			}
		})
	}
}

// TestIllegalHandoverMoveIsReported: a move the table does not list is reported in the
// output (a *PhaseMoveError) and counted.
func TestIllegalHandoverMoveIsReported(t *testing.T) {
	f := newHM(t, hcfg{}).serve()
	var out HandoverOutput
	f.m.in = InputDown
	f.m.to(&out, PhaseDrained)
	var me *PhaseMoveError
	if len(out.Illegal) != 1 || !errors.As(out.Illegal[0], &me) || !errors.Is(me, ErrIllegalPhaseMove) ||
		me.From != PhaseRelaying || me.To != PhaseDrained || me.Input != InputDown || f.m.illegal != 1 {
		t.Fatalf("illegal %v (count %d), want relaying to drained on Down", out.Illegal, f.m.illegal)
	}
	if !strings.Contains(me.Error(), "from relaying to drained on Down") {
		t.Fatalf("message %q", me)
	}
}

// TestHandoverTableIsDocumented keeps the table in HandoverMachine's doc comment the
// one the machine consults, and every phase in it.
func TestHandoverTableIsDocumented(t *testing.T) {
	fsmtabletest.CheckDoc(t, "rootmachine.go", "HandoverMachine", phaseTable)
	for p := PhaseRelaying; p <= PhaseDone; p++ {
		if !phaseTable.Has(p) || hmPaths()[p] == nil {
			t.Errorf("%s: in the table %v, a path %v", p, phaseTable.Has(p), hmPaths()[p] != nil)
		}
	}
}
