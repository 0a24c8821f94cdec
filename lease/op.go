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
	OpPublish    // write our lease period beside the record (Store.Publish)
	OpReadEpoch  // read the epoch record (Store.ReadEpoch)
	OpWriteEpoch // compare-and-swap the epoch record (Store.WriteEpoch)
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
	case OpReadEpoch:
		return "read the epoch"
	case OpWriteEpoch:
		return "write the epoch"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Purpose is what a store call is for. Drivers may run calls of different purposes on
// different workers; the machine only says what each is for.
type Purpose uint8

const (
	PurposeClaim   Purpose = iota + 1 // take the lease: the reads, creates and takeovers of a claim or a standby
	PurposeRenewal                    // keep the lease we hold: renewals, the reads and creates after a conflict or an eviction, publishing our period, settling and bumping the epoch
	PurposeRelease                    // give it up: the delete and the reads after it conflicts, marking the epoch draining and drained
)

func (p Purpose) String() string {
	switch p {
	case PurposeClaim:
		return "claim"
	case PurposeRenewal:
		return "renewal"
	case PurposeRelease:
		return "release"
	}
	return fmt.Sprintf("Purpose(%d)", uint8(p))
}

// Op is a store call the driver must run and report with Done.
type Op struct {
	ID       uint64 // echo it in the Result
	Kind     OpKind
	Purpose  Purpose
	Holder   Holder        // create, update
	Revision uint64        // update, delete, write epoch (the epoch record's; 0: none)
	Period   Period        // publish
	Epoch    EpochRecord   // write epoch: the record to write (its Revision unused)
	Timeout  time.Duration // cut the call off after this
}

func (o Op) String() string {
	switch o.Kind {
	case OpUpdate, OpDelete:
		return fmt.Sprintf("%s at revision %d", o.Kind, o.Revision)
	case OpWriteEpoch:
		return fmt.Sprintf("write epoch %d (%s) at revision %d", o.Epoch.Epoch, o.Epoch.State, o.Revision)
	}
	return o.Kind.String()
}

// Result is the outcome of an Op. Err nil: committed; errors.Is(Err, ErrConflict):
// surely not committed; any other error: unknown.
type Result struct {
	ID     uint64
	Rev    uint64      // create, update, write epoch
	Record Record      // read
	Epoch  EpochRecord // read epoch
	Err    error
}
