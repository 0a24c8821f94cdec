package actors

import (
	"errors"
	"fmt"
	"strings"
)

// HandoverInput is what moves a HandoverMachine's phase: a message of the cascade, a
// phase's deadline, or a phase that began with nothing to wait for.
type HandoverInput uint8

const (
	InputOther         HandoverInput = iota // moves no phase: a role change, Accepting, ServeFailed, a retry
	InputHandover                           // Handover
	InputRollCall                           // the roll call of standbys returned
	InputDrained                            // Drained, from the jobs host or a member
	InputReleased                           // Released, from the ownership
	InputSuccessorDone                      // the wait for a successor returned
	InputSessionsDone                       // the second wait for sessions returned
	InputDown                               // Down, from a member or the jobs host
	InputDrainMarked                        // DrainMarked, from the ownership
	InputDeadline                           // the phase's deadline passed
	InputOver                               // the phase begun has nothing to wait for
	InputLost                               // Lost, from the ownership
)

var handoverInputNames = [...]string{InputOther: "Other", InputHandover: "Handover", InputRollCall: "RollCall",
	InputDrained: "Drained", InputReleased: "Released", InputSuccessorDone: "SuccessorDone",
	InputSessionsDone: "SessionsDone", InputDown: "Down", InputDrainMarked: "DrainMarked",
	InputDeadline: "Deadline", InputOver: "Over", InputLost: "Lost"}

func (in HandoverInput) String() string {
	if int(in) < len(handoverInputNames) {
		return handoverInputNames[in]
	}
	return fmt.Sprintf("HandoverInput(%d)", uint8(in))
}

// inputOf is the input msg stands for in the table.
func inputOf(msg any) HandoverInput {
	switch msg.(type) {
	case Handover:
		return InputHandover
	case rollCallDone:
		return InputRollCall
	case Drained:
		return InputDrained
	case Released:
		return InputReleased
	case Lost:
		return InputLost
	case successorDone:
		return InputSuccessorDone
	case sessionsDone:
		return InputSessionsDone
	case Down:
		return InputDown
	case DrainMarked:
		return InputDrainMarked
	case phaseDeadline:
		return InputDeadline
	}
	return InputOther
}

// ErrIllegalPhaseMove is matched by every *PhaseMoveError.
var ErrIllegalPhaseMove = errors.New("actors: illegal handover move")

// PhaseMoveError is a move of the handover that its table does not allow: a bug in the
// machine. The machine makes it all the same (the cascade must end), and the root logs
// it.
type PhaseMoveError struct {
	From, To Phase
	Input    HandoverInput
}

func (e *PhaseMoveError) Error() string {
	return fmt.Sprintf("actors: illegal handover move from %s to %s on %s", e.From, e.To, e.Input)
}

func (e *PhaseMoveError) Is(target error) bool { return target == ErrIllegalPhaseMove }

// phaseRow is a row of the table above HandoverMachine: in From, input In (when the
// condition When holds) moves the handover to To.
type phaseRow struct {
	From Phase
	In   HandoverInput
	When string
	To   Phase
}

// phaseRows is the table above HandoverMachine, as data: to() allows only these moves,
// and a test renders it and finds it in HandoverMachine's doc comment.
var phaseRows = []phaseRow{
	{PhaseRelaying, InputHandover, "a jobs host", PhaseJobs},
	{PhaseRelaying, InputHandover, "no jobs host", PhaseRelease},
	{PhaseRelaying, InputHandover, "fail point release-before-jobs", PhaseRelease},

	{PhaseJobs, InputDrained, "the jobs host's", PhaseRelease},
	{PhaseJobs, InputDeadline, "the runs returned, or the lease not ours to keep", PhaseRelease},
	{PhaseJobs, InputDeadline, "a run has not returned, the lease ours", PhaseJobs},
	{PhaseJobs, InputDrained, "the jobs host's, release-before-jobs", PhaseStop},
	{PhaseJobs, InputDeadline, "release-before-jobs", PhaseStop},

	{PhaseRelease, InputReleased, "a successor check", PhaseSuccessor},
	{PhaseRelease, InputReleased, "no successor check", PhaseDrain},
	{PhaseRelease, InputDeadline, "a successor check", PhaseSuccessor},
	{PhaseRelease, InputDeadline, "no successor check", PhaseDrain},
	{PhaseRelease, InputLost, "a successor check", PhaseSuccessor},
	{PhaseRelease, InputLost, "no successor check", PhaseDrain},
	{PhaseRelease, InputOver, "nothing to release, a successor check", PhaseSuccessor},
	{PhaseRelease, InputOver, "nothing to release, no successor check", PhaseDrain},

	{PhaseSuccessor, InputOver, "no bound, member, release or standby", PhaseDrain},
	{PhaseSuccessor, InputSuccessorDone, "", PhaseDrain},
	{PhaseSuccessor, InputRollCall, "none stands by", PhaseDrain},
	{PhaseSuccessor, InputDeadline, "", PhaseDrain},

	{PhaseDrain, InputOver, "no member, or drain_seconds 0", PhaseSessions},
	{PhaseDrain, InputDrained, "the last member's", PhaseSessions},
	{PhaseDrain, InputDeadline, "", PhaseSessions},

	{PhaseSessions, InputOver, "no wait, or past the drain deadline", PhaseStop},
	{PhaseSessions, InputSessionsDone, "", PhaseStop},
	{PhaseSessions, InputDeadline, "", PhaseStop},
	{PhaseSessions, InputOver, "release-before-jobs, a jobs host", PhaseJobs},
	{PhaseSessions, InputSessionsDone, "release-before-jobs, a jobs host", PhaseJobs},
	{PhaseSessions, InputDeadline, "release-before-jobs, a jobs host", PhaseJobs},

	{PhaseStop, InputOver, "no member and no jobs host", PhaseDrained},
	{PhaseStop, InputDown, "the last", PhaseDrained},
	{PhaseStop, InputDeadline, "", PhaseDrained},

	{PhaseDrained, InputDrainMarked, "", PhaseDone},
	{PhaseDrained, InputDeadline, "", PhaseDone},
}

type phaseMove struct {
	from, to Phase
	in       HandoverInput
}

// legalPhaseMoves indexes phaseRows.
var legalPhaseMoves = func() map[phaseMove]bool {
	m := make(map[phaseMove]bool, len(phaseRows))
	for _, r := range phaseRows {
		m[phaseMove{r.From, r.To, r.In}] = true
	}
	return m
}()

// to moves the handover to p, checking the move against the table.
func (m *HandoverMachine) to(out *HandoverOutput, p Phase) {
	mv := PhaseMove{From: m.phase, To: p, Input: m.in}
	if !legalPhaseMoves[phaseMove{mv.From, mv.To, mv.Input}] {
		m.illegal++
		out.Illegal = append(out.Illegal, &PhaseMoveError{From: mv.From, To: mv.To, Input: mv.Input})
	}
	out.Moves = append(out.Moves, mv)
	m.phase = p
}

// phaseTableText renders phaseRows as the table in HandoverMachine's doc comment.
func phaseTableText() string {
	var b strings.Builder
	for i, r := range phaseRows {
		from := r.From.String()
		if i > 0 && phaseRows[i-1].From == r.From {
			from = ""
		} else if i > 0 {
			b.WriteString("\n")
		}
		in := r.In.String()
		if r.When != "" {
			in += " " + r.When
		}
		fmt.Fprintf(&b, "%-11s %-57s → %s\n", from, in, r.To)
	}
	return b.String()
}
