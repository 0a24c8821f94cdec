package lease

import "fmt"

// State is where an engine stands with the lease. The zero value is not a state.
type State uint8

// The states of docs/design.md §4.5 and docs/decision.md.
const (
	StateIdle     State = iota + 1 // not holding: claiming, or a claim that failed
	StateStandby                   // another rollout holds it; waiting for the handover
	StateServing                   // holding and renewing
	StateFenced                    // believes it holds it but could not renew: serves nothing
	StateLost                      // another engine holds it: terminal
	StateReleased                  // released (or never held and stopped): terminal
)

func (s State) String() string {
	switch s {
	case StateIdle:
		return "idle"
	case StateStandby:
		return "standby"
	case StateServing:
		return "serving"
	case StateFenced:
		return "fenced"
	case StateLost:
		return "lost"
	case StateReleased:
		return "released"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Terminal reports whether no further transition can happen.
func (s State) Terminal() bool { return s == StateLost || s == StateReleased }
