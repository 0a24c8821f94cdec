package lease

import (
	"fmt"
	"time"
)

// OpKind names a store call.
type OpKind uint8

// The store calls a Machine asks for.
const (
	OpRead OpKind = iota + 1
	OpCreate
	OpUpdate
	OpDelete
	OpPublish // write our lease period beside the record (Store.Publish)
)

func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "read"
	case OpCreate:
		return "create"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpPublish:
		return "publish the lease period"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is a store call the driver must run and report with Done.
type Op struct {
	ID       uint64 // echo it in the Result
	Kind     OpKind
	Holder   Holder        // create, update
	Revision uint64        // update, delete
	Period   Period        // publish
	Timeout  time.Duration // cut the call off after this
	// Renewal marks calls that keep a held lease (renewals and their re-reads); the
	// renewer runs them, everything else runs on the ownership actor's worker.
	Renewal bool
}

func (o Op) String() string {
	switch o.Kind {
	case OpUpdate, OpDelete:
		return fmt.Sprintf("%s at revision %d", o.Kind, o.Revision)
	}
	return o.Kind.String()
}

// Result is the outcome of an Op. Err nil: committed; errors.Is(Err, ErrConflict):
// surely not committed; any other error: unknown.
type Result struct {
	ID     uint64
	Rev    uint64 // create, update
	Record Record // read
	Err    error
}

// Output is what one step asks of the driver.
type Output struct {
	Op     *Op     // run it now; nil: nothing to run
	Events []Event // log and count each, in order
	// Err ends a claim (state back to idle): *AlreadyServingError or
	// *StandbyTimeoutError. The driver reports it and stops.
	Err error
}
