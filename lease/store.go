package lease

import (
	"context"
	"errors"
	"fmt"
)

// Record is the lease as a Store holds it. Revision 0 means the lease is free (no key,
// or a delete marker); revisions only move forward.
type Record struct {
	Holder   Holder
	Revision uint64
	// Freed is, on a free record a watch delivers, the revision of the delete or purge
	// that freed the lease; 0 when unknown (the key is absent, or a Read). A holder
	// tells by it a deletion older than its own revision from one after it.
	Freed uint64
	// Period is what the period key held when Read read the record (a watch leaves it
	// zero); HolderLease says whether it is the holder's.
	Period Period
}

// Free reports whether nobody holds the lease.
func (r Record) Free() bool { return r.Revision == 0 }

func (r Record) String() string {
	if r.Free() {
		return "free"
	}
	return fmt.Sprintf("revision %d held by %s", r.Revision, r.Holder)
}

// ErrConflict is a compare-and-swap that failed: the lease was not at the revision
// given. The write surely did not happen.
var ErrConflict = errors.New("lease: revision conflict")

// ErrIncarnation is a conditional write refused because the lease bucket is no longer
// the one its revision was read in: it was deleted and recreated, and its revisions
// started again. It matches ErrConflict: the write surely did not happen, and a read
// finds the new bucket's record.
var ErrIncarnation = fmt.Errorf("lease: the lease bucket was recreated since its revision was read: %w", ErrConflict)

// ErrTaken is a create that found the lease held. errors.Is(ErrTaken, ErrConflict) holds.
var ErrTaken = fmt.Errorf("lease: already taken: %w", ErrConflict)

// Store keeps the lease record. Every write is conditional. Errors other than
// ErrConflict mean the outcome is unknown: the write may have happened.
type Store interface {
	// Read returns the current record; a free lease is the zero Record.
	Read(ctx context.Context) (Record, error)
	// Create takes a free lease and returns its revision, or ErrTaken.
	Create(ctx context.Context, h Holder) (uint64, error)
	// Update rewrites the lease at revision rev and returns the new, higher revision,
	// even when h is unchanged (that is how a holder proves it is alive). A lease at
	// another revision, or free, is ErrConflict.
	Update(ctx context.Context, h Holder, rev uint64) (uint64, error)
	// Delete frees the lease at revision rev (rev > 0), or ErrConflict.
	Delete(ctx context.Context, rev uint64) error
	// Publish writes the holder's lease period beside the record, unconditionally. It
	// never changes the record or its revision; Read reports it with a held record.
	Publish(ctx context.Context, p Period) error
	// Watch delivers the current record at once, then every change of it (a delete
	// as a free record carrying Freed), until the Watcher is stopped or ctx ends. A
	// key never written (or gone without a marker) may deliver nothing until it is:
	// a watch never reports a free lease it cannot vouch for.
	Watch(ctx context.Context) (Watcher, error)

	// ReadEpoch returns the epoch record beside the lease; no record is the zero
	// EpochRecord. A value that is not an epoch record is an *EpochValueError.
	ReadEpoch(ctx context.Context) (EpochRecord, error)
	// WriteEpoch writes e (its Revision is ignored) if the record is at revision rev,
	// rev 0 meaning there is none, and returns the new revision; otherwise ErrConflict.
	// It never touches the lease record or its revision, nor they it.
	WriteEpoch(ctx context.Context, e EpochRecord, rev uint64) (uint64, error)
	// WatchEpoch delivers the epoch record at once, then every change of it, as Watch
	// does for the lease; a deleted or unreadable record comes with its revision only.
	WatchEpoch(ctx context.Context) (EpochWatcher, error)
}

// Watcher delivers lease records.
type Watcher interface {
	// Updates is closed when the watcher stops.
	Updates() <-chan Record
	// Stop ends the watch and waits for its goroutines.
	Stop()
}
