package lease

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// The epoch (docs/design.md §4.7, docs/architecture.md "Epoch") is a number that changes only
// when ownership changes: a fencing token every shared backend checks at the commit of
// each write. It is kept beside the lease in a key of its own (the six-key record is the
// Python engines'), as an EpochRecord changed only by compare-and-swap on its revision.

// EpochState is what the engine an epoch record names is doing with its epoch.
type EpochState uint8

const (
	EpochServing  EpochState = iota + 1 // it serves under the epoch
	EpochDraining                       // it released the lease and answers what it had received
	EpochDrained                        // its drain is over: nothing of it commits any more
)

var epochStateNames = [...]string{EpochServing: "serving", EpochDraining: "draining", EpochDrained: "drained"}

func (s EpochState) String() string {
	if s >= EpochServing && int(s) < len(epochStateNames) {
		return epochStateNames[s]
	}
	return fmt.Sprintf("EpochState(%d)", uint8(s))
}

// EpochRecord is the epoch record as a Store keeps it: the epoch, the engine that
// holds it and what that engine is doing with it. Revision 0 means there is no record.
type EpochRecord struct {
	Epoch      uint64
	InstanceID string
	State      EpochState
	// Revision is the key's revision. A watch delivers a deleted record, or a value
	// that is not an epoch record, with its revision and no Epoch.
	Revision uint64
}

// None reports whether there is no record.
func (e EpochRecord) None() bool { return e.Revision == 0 }

func (e EpochRecord) String() string {
	switch {
	case e.None():
		return "no epoch record"
	case e.Epoch == 0:
		return fmt.Sprintf("no epoch record (revision %d)", e.Revision)
	}
	return fmt.Sprintf("epoch %d of %s, %s (revision %d)", e.Epoch, e.InstanceID, e.State, e.Revision)
}

type epochJSON struct {
	Epoch      uint64 `json:"epoch"`
	InstanceID string `json:"instance_id"`
	State      string `json:"state"`
}

// Encode is the value of the epoch key: {"epoch": N, "instance_id": "...", "state": "..."}.
func (e EpochRecord) Encode() []byte {
	b, err := json.Marshal(epochJSON{Epoch: e.Epoch, InstanceID: e.InstanceID, State: e.State.String()})
	if err != nil {
		// An integer and two strings always marshal.
		panic(fmt.Sprintf("lease: encode epoch: %v", err))
	}
	return b
}

// ErrEpochValue is matched by every *EpochValueError.
var ErrEpochValue = errors.New("lease: not an epoch record")

// EpochValueError is a value in the epoch key that is not an epoch record. Unlike a
// foreign lease value, it cannot be read as anything safe: an engine that guessed the
// epoch could serve under one the backends have passed, or below one a zombie still
// writes under. So it is an error, never a guess.
type EpochValueError struct {
	Value  []byte
	Reason string
}

func (e *EpochValueError) Error() string {
	v := e.Value
	if len(v) > 128 {
		v = append(v[:128:128], "..."...)
	}
	return fmt.Sprintf("lease: the epoch key holds %q, which is not an epoch record: %s "+
		`(want {"epoch": N, "instance_id": "...", "state": "serving|draining|drained"})`, v, e.Reason)
}

func (e *EpochValueError) Is(target error) bool { return target == ErrEpochValue }

// DecodeEpoch reads a value of the epoch key (its Revision is left 0): an object with
// a positive integer epoch, a non-empty instance_id and one of the three states.
// Anything else is an *EpochValueError naming what is wrong.
func DecodeEpoch(b []byte) (EpochRecord, error) {
	bad := func(reason string) (EpochRecord, error) {
		return EpochRecord{}, &EpochValueError{Value: bytes.Clone(b), Reason: reason}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return bad("not a JSON object")
	}
	var n float64
	if json.Unmarshal(raw["epoch"], &n) != nil || n < 1 || n != math.Trunc(n) || n > 1<<53 {
		return bad("epoch is not a positive integer")
	}
	var id, state string
	if json.Unmarshal(raw["instance_id"], &id) != nil || id == "" {
		return bad("instance_id is not a non-empty string")
	}
	if json.Unmarshal(raw["state"], &state) != nil {
		return bad("state is not a string")
	}
	rec := EpochRecord{Epoch: uint64(n), InstanceID: id}
	for s := EpochServing; s <= EpochDrained; s++ {
		if s.String() == state {
			rec.State = s
		}
	}
	if rec.State == 0 {
		return bad(fmt.Sprintf("state %q is none of serving, draining, drained", state))
	}
	return rec, nil
}

// EpochWatcher delivers epoch records.
type EpochWatcher interface {
	// Updates is closed when the watcher stops.
	Updates() <-chan EpochRecord
	// Stop ends the watch and waits for its goroutines.
	Stop()
}
