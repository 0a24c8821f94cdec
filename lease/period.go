package lease

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Period is a holder's lease period as it publishes it beside the record (docs/design.md §4.1):
// the six-key record has no room for it (the Python engines read that record), so it
// lives in a key of its own as {"instance_id": "<holder>", "lease_ms": N}.
//
// A contender judges a holder's silence by the longer of its own period and the one the
// holder published, so a holder that renews on a longer schedule than the contender's is
// never taken for dead while it renews. A holder that publishes nothing (a Python engine)
// is judged by the contender's own period.
type Period struct {
	InstanceID string        // the holder that published it
	Lease      time.Duration // its lease period; 0: none
}

// MaxPublishedLease caps a published period: the longest lease_seconds a configuration
// allows. A larger value (written by hand, or by a broken engine) delays a takeover of
// a dead holder by no more than the longest lease an engine can have.
const MaxPublishedLease = 300 * time.Second

type periodJSON struct {
	InstanceID string `json:"instance_id"`
	LeaseMS    int64  `json:"lease_ms"`
}

// Encode is the value of the period key for p.
func (p Period) Encode() []byte {
	b, err := json.Marshal(periodJSON{InstanceID: p.InstanceID, LeaseMS: p.Lease.Milliseconds()})
	if err != nil {
		// A string and an int always marshal.
		panic(fmt.Sprintf("lease: encode period: %v", err))
	}
	return b
}

// DecodePeriod reads a period value. It never fails: anything unreadable (not a JSON
// object, a field of the wrong type, a period that is not a positive number of
// milliseconds) reads as the zero Period, "not published", so a foreign value in the
// key leaves contenders with their own period, as for a holder that publishes none.
func DecodePeriod(b []byte) Period {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Period{}
	}
	var id string
	if json.Unmarshal(raw["instance_id"], &id) != nil || id == "" {
		return Period{}
	}
	var ms float64
	if json.Unmarshal(raw["lease_ms"], &ms) != nil || math.IsNaN(ms) || ms < 1 {
		return Period{}
	}
	lease := MaxPublishedLease
	if ms < float64(MaxPublishedLease/time.Millisecond) {
		lease = time.Duration(ms) * time.Millisecond
	}
	return Period{InstanceID: id, Lease: lease}
}

// HolderLease is the lease period the record's holder published: Period's, when it
// names the holder; 0 when the holder published none or the period names another
// engine (an earlier holder's, left behind).
func (r Record) HolderLease() time.Duration {
	if r.Free() || !r.Holder.Known() || r.Period.InstanceID != r.Holder.InstanceID {
		return 0
	}
	return r.Period.Lease
}
