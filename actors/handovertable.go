package actors

import (
	"errors"
	"fmt"

	"github.com/abi-engine/engine/internal/fsmtable"
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

// phaseRow is a row of the table above HandoverMachine: in From, input In (when the
// condition When holds) moves the handover to To.
type phaseRow = fsmtable.Row[Phase, HandoverInput]

// row is a row of phaseTable, written as the table reads: from, input, when, to.
func row(from Phase, in HandoverInput, when string, to Phase) phaseRow {
	return phaseRow{From: from, In: in, When: when, To: to}
}

// phaseTable is the table above HandoverMachine, as data: to() allows only these
// moves, and a test renders it (in columns of 11 and 57) and finds it in
// HandoverMachine's doc comment.
var phaseTable = fsmtable.New([]phaseRow{
	row(PhaseRelaying, InputHandover, "a jobs host", PhaseJobs),
	row(PhaseRelaying, InputHandover, "no jobs host", PhaseRelease),
	row(PhaseRelaying, InputHandover, "fail point release-before-jobs", PhaseRelease),

	row(PhaseJobs, InputDrained, "the jobs host's", PhaseRelease),
	row(PhaseJobs, InputDeadline, "the runs returned, or the lease not ours to keep", PhaseRelease),
	row(PhaseJobs, InputDeadline, "a run has not returned, the lease ours", PhaseJobs),
	row(PhaseJobs, InputDrained, "the jobs host's, release-before-jobs", PhaseStop),
	row(PhaseJobs, InputDeadline, "release-before-jobs", PhaseStop),

	row(PhaseRelease, InputReleased, "a successor check", PhaseSuccessor),
	row(PhaseRelease, InputReleased, "no successor check", PhaseDrain),
	row(PhaseRelease, InputDeadline, "a successor check", PhaseSuccessor),
	row(PhaseRelease, InputDeadline, "no successor check", PhaseDrain),
	row(PhaseRelease, InputLost, "a successor check", PhaseSuccessor),
	row(PhaseRelease, InputLost, "no successor check", PhaseDrain),
	row(PhaseRelease, InputOver, "nothing to release, a successor check", PhaseSuccessor),
	row(PhaseRelease, InputOver, "nothing to release, no successor check", PhaseDrain),

	row(PhaseSuccessor, InputOver, "no bound, member, release or standby", PhaseDrain),
	row(PhaseSuccessor, InputSuccessorDone, "", PhaseDrain),
	row(PhaseSuccessor, InputRollCall, "none stands by", PhaseDrain),
	row(PhaseSuccessor, InputDeadline, "", PhaseDrain),

	row(PhaseDrain, InputOver, "no member, or drain_seconds 0", PhaseSessions),
	row(PhaseDrain, InputDrained, "the last member's", PhaseSessions),
	row(PhaseDrain, InputDeadline, "", PhaseSessions),

	row(PhaseSessions, InputOver, "no wait, or past the drain deadline", PhaseStop),
	row(PhaseSessions, InputSessionsDone, "", PhaseStop),
	row(PhaseSessions, InputDeadline, "", PhaseStop),
	row(PhaseSessions, InputOver, "release-before-jobs, a jobs host", PhaseJobs),
	row(PhaseSessions, InputSessionsDone, "release-before-jobs, a jobs host", PhaseJobs),
	row(PhaseSessions, InputDeadline, "release-before-jobs, a jobs host", PhaseJobs),

	row(PhaseStop, InputOver, "no member and no jobs host", PhaseDrained),
	row(PhaseStop, InputDown, "the last", PhaseDrained),
	row(PhaseStop, InputDeadline, "", PhaseDrained),

	row(PhaseDrained, InputDrainMarked, "", PhaseDone),
	row(PhaseDrained, InputDeadline, "", PhaseDone),
}, 11, 57)

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

// to moves the handover to p, checking the move against the table.
func (m *HandoverMachine) to(out *HandoverOutput, p Phase) {
	mv := PhaseMove{From: m.phase, To: p, Input: m.in}
	if !phaseTable.Legal(mv.From, mv.Input, mv.To) {
		m.illegal++
		out.Illegal = append(out.Illegal, &PhaseMoveError{From: mv.From, To: mv.To, Input: mv.Input})
	}
	out.Moves = append(out.Moves, mv)
	m.phase = p
}
