package control

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/abi-engine/engine/lease"
)

// Prefix is the control subjects' prefix.
const Prefix = "abi.engine.v1.control"

// StandbysSubject is the roll call: every engine standing by answers a request on it.
const StandbysSubject = Prefix + ".standbys"

// StepDownSubject is where the engine with instance id asks to step down.
func StepDownSubject(instance string) string { return Prefix + "." + instance + ".step_down" }

// StepDownRequest asks the serving engine to hand over. To, when set, is the rollout
// that must take it; otherwise the longest-waiting standby does. Stay keeps the old
// engine's process as a standby instead of exiting.
type StepDownRequest struct {
	To   string `json:"to,omitempty"`
	Stay bool   `json:"stay,omitempty"`
}

// Standby is an engine standing by, as it answers the roll call.
type Standby struct {
	InstanceID string    `json:"instance_id"`
	RolloutID  string    `json:"rollout_id"`
	Since      time.Time `json:"since"` // when it began standing by
	Hot        bool      `json:"hot"`   // nats.engine.standby: hot
}

// Target is the lease target that hands over to s alone.
func (s Standby) Target() lease.Target {
	return lease.Target{InstanceID: s.InstanceID, RolloutID: s.RolloutID}
}

// StepDownReply answers a StepDownRequest: the successor chosen, or an error.
type StepDownReply struct {
	// Successor is the standby the lease is handed to (with To, the longest-waiting of
	// that rollout; any standby of it may take the lease).
	Successor *Standby `json:"successor,omitempty"`
	Error     *Error   `json:"error,omitempty"`
}

// Error is a refused step-down.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Codes of a refused step-down. Nothing changed in either case.
const (
	CodeNoStandby  = "NO_STANDBY"  // no standby qualifies
	CodeNotServing = "NOT_SERVING" // the engine asked does not serve (fenced, releasing, standing by)
	CodeInvalid    = "INVALID_ARGUMENT"
)

// ErrNoStandby is a step-down refused because no standby qualifies; ErrNotServing one
// asked of an engine that does not serve. Both left everything as it was.
var (
	ErrNoStandby  = errors.New("control: no standby qualifies")
	ErrNotServing = errors.New("control: the engine does not serve")
)

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is matches the sentinel of the error's code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeNoStandby:
		return target == ErrNoStandby
	case CodeNotServing:
		return target == ErrNotServing
	}
	return false
}

// Choose picks the standby a step-down hands over to: of rollout to (any rollout when
// to is empty), the one that has waited longest, never self. ok is false when none
// qualifies.
func Choose(standbys []Standby, to, self string) (Standby, bool) {
	var ok []Standby
	for _, s := range standbys {
		if s.InstanceID != self && (to == "" || s.RolloutID == to) {
			ok = append(ok, s)
		}
	}
	if len(ok) == 0 {
		return Standby{}, false
	}
	return slices.MinFunc(ok, func(a, b Standby) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.InstanceID, b.InstanceID)
	}), true
}

// TargetFor is the lease target of a step-down to to, with s chosen: to names a
// rollout, any of whose standbys may take the lease; without it, s alone may.
func TargetFor(s Standby, to string) lease.Target {
	if to != "" {
		return lease.Target{RolloutID: to}
	}
	return s.Target()
}

func noStandby(to string, seen int) *Error {
	what := "no engine stands by"
	if to != "" {
		what = fmt.Sprintf("no engine of rollout %s stands by (%d standby of other rollouts)", to, seen)
	}
	return &Error{Code: CodeNoStandby, Message: what + ": nothing was changed; start a standby (another rollout id, or nats.engine.standby: hot) first"}
}
