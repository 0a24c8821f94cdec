package lease

import (
	"fmt"
	"strings"
)

// A directed handover (abi-engine step-down): the holder does not delete the lease, it
// compare-and-swaps its record to a released-to form that names who may take it at
// once. Only that engine does (a compare-and-swap at that revision, without waiting);
// every other contender reads the form as a holder that has gone silent, and takes it
// over only after a full lease of silence from that revision, as after a crash. So a
// successor that dies mid-handover cannot block ownership: it costs one lease.
//
// Where the form lives: the six-key record is read by the Python engines, so it keeps
// its six keys, and the form is a value of one of them: rollout_id becomes
// "released-to rollout=<r>" or "released-to instance=<id> rollout=<r>". A rollout id
// never contains a space (config's rule, and the Python engine's), so no engine can
// take the form for its own rollout: a Python contender sees a holder of a rollout not
// its own, which stops renewing, stands by (or watches it, without a rollout id), and
// takes over after a lease of silence, as it would after a crash. The other keys stay
// the releasing holder's, so status still names the engine that released it.

// releasedToPrefix starts the released-to form of rollout_id.
const releasedToPrefix = "released-to "

// Target names who may take a lease released to it at once.
type Target struct {
	// InstanceID, when set, names the one engine that may; RolloutID is then its
	// rollout, for the record's reader.
	InstanceID string
	// RolloutID, with no InstanceID, lets any engine of that rollout take it.
	RolloutID string
}

// Zero reports whether t names nobody: a release with no target deletes the lease.
func (t Target) Zero() bool { return t == Target{} }

// Names reports whether t lets me take the lease at once.
func (t Target) Names(me Holder) bool {
	if t.InstanceID != "" {
		return t.InstanceID == me.InstanceID
	}
	return !t.Zero() && t.RolloutID == me.RolloutID
}

func (t Target) String() string {
	switch {
	case t.InstanceID != "":
		return fmt.Sprintf("instance %s (rollout %s)", t.InstanceID, orNone(t.RolloutID))
	case t.Zero():
		return "any standby"
	}
	return "rollout " + t.RolloutID
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ReleasedTo is h's record in the released-to form for t: the same six keys, rollout_id
// naming t.
func (h Holder) ReleasedTo(t Target) Holder {
	var b strings.Builder
	b.WriteString(releasedToPrefix)
	if t.InstanceID != "" {
		b.WriteString("instance=" + t.InstanceID + " ")
	}
	b.WriteString("rollout=" + t.RolloutID)
	h.RolloutID = b.String()
	return h
}

// Handoff reports whether h is a released-to form, and whom it names. A form that does
// not parse names nobody: it is judged as any silent holder.
func (h Holder) Handoff() (Target, bool) {
	rest, ok := strings.CutPrefix(h.RolloutID, releasedToPrefix)
	if !ok {
		return Target{}, false
	}
	var t Target
	for f := range strings.FieldsSeq(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "instance":
			t.InstanceID = v
		case "rollout":
			t.RolloutID = v
		}
	}
	return t, true
}
