// Package epoch is the storage side of the engine's fencing token, the epoch
// (docs/architecture.md "Epoch"): the rule by which a shared backend adopts the epoch an
// engine serves under, what the backend holds once it has, and how it reads a write its
// store refused for its epoch. The backends (JetStream KV and object store, PostgreSQL)
// keep the record and check it at the commit; this package decides, on the standard
// library alone, so every backend follows one rule.
//
// A store holds the epoch it was last advanced to, as a Record. Adopting epoch N:
//
//   - the store's epoch is older than N (or it has none): advance it to N with a
//     conditional write, which a store that moved on meanwhile refuses;
//   - it is N: use the record as it is (the designed overlap of a clean handover: the
//     old holder adopted it already), unless the engine took N as new (Taken) and this
//     backend never held N: then another engine served under N, which can happen only
//     when the lease's epoch record was lost, and adoption fails with a *StaleError at
//     N, so the engine goes past it;
//   - it is newer than N: this engine is stale; adoption fails with a *StaleError,
//     which matches ErrFenced.
//
// Every write the backend makes then carries the Record it holds (Held), and the store
// refuses a write whose record is no longer the store's. Held.Judge reads such a
// refusal: resend it once (this backend's own record moved on), answer it fenced (a
// newer epoch), or answer it lost (the store lost its record, e.g. a recreated bucket;
// Held.Restore adopts the held epoch again).
package epoch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrFenced is what a write refused for a stale epoch, and a stale adoption, match: the
// store holds a newer epoch, so another engine took over and this one must not write.
var ErrFenced = errors.New("the store holds a newer epoch: another engine took over")

// ErrLost is what a write refused because the store lost its epoch record matches (a
// bucket deleted and recreated): the write stored nothing, and the backend adopts its
// epoch again (Held.Restore) before its writes commit.
var ErrLost = errors.New("the store lost its epoch record")

// ErrMoved is what Records.WriteEpoch returns when the store's record is no longer the
// one the write was conditional on.
var ErrMoved = errors.New("the epoch record changed meanwhile")

// Record is a store's epoch record: the epoch and the revision the store gave the
// record (a JetStream sequence; a store without revisions uses the epoch). The zero
// Record is a store that holds none: it was never advanced, or it lost its record.
type Record struct {
	Epoch uint64
	Rev   uint64
}

// Records is a backend's access to its store's epoch record.
type Records interface {
	// ReadEpoch reads the record; the zero Record when the store has none.
	ReadEpoch(ctx context.Context) (Record, error)
	// WriteEpoch replaces the record over (the zero Record: none) with one holding
	// epoch, conditionally: when the store holds another record by then it writes
	// nothing and returns an error matching ErrMoved.
	WriteEpoch(ctx context.Context, epoch uint64, over Record) (Record, error)
}

// StaleError is a store that holds a newer epoch than an engine offered it. It
// matches ErrFenced.
type StaleError struct {
	// Store names the bucket or table: "JetStream bucket ABI_KV".
	Store string
	// Epoch is the engine's epoch (0: it adopted none); Current the store's.
	Epoch, Current uint64
}

func (e *StaleError) Error() string {
	if e.Current == e.Epoch {
		return fmt.Sprintf("%s already holds epoch %d, which another engine adopted: this engine took it as a new epoch "+
			"(the lease's epoch record was lost), so it must go past it, never join it", e.Store, e.Epoch)
	}
	return fmt.Sprintf("%s is at epoch %d, newer than this engine's %s: another engine took over",
		e.Store, e.Current, describe(e.Epoch))
}

func (e *StaleError) Unwrap() error { return ErrFenced }

// LostError is a store whose record is older than the epoch a backend holds, or gone.
// It matches ErrLost.
type LostError struct {
	Store          string
	Epoch, Current uint64 // the held epoch; the store's (0: no record)
}

func (e *LostError) Error() string {
	have := "no epoch record"
	if e.Current > 0 {
		have = fmt.Sprintf("epoch %d", e.Current)
	}
	return fmt.Sprintf("%s holds %s, older than this engine's epoch %d: it lost its record (deleted and recreated?), and the engine adopts its epoch again when it probes the backend",
		e.Store, have, e.Epoch)
}

func (e *LostError) Unwrap() error { return ErrLost }

func describe(epoch uint64) string {
	if epoch == 0 {
		return "(it adopted none)"
	}
	return fmt.Sprintf("epoch %d", epoch)
}

// Refused returns wire, a backend's error for a write its store refused for the
// epoch (a retryable protocol error naming the store and both epochs), so that it also
// matches cause (a *StaleError, which matches ErrFenced and is counted as a fenced
// write, abi_engine_fenced_writes_total; or a *LostError): errors.Is and errors.As
// find both, and it reads as wire.
func Refused(wire, cause error) error { return refused{wire, cause} }

type refused struct{ wire, cause error }

func (r refused) Error() string   { return r.wire.Error() }
func (r refused) Unwrap() []error { return []error{r.wire, r.cause} }

// maxAdoptAttempts bounds Adopt's read-then-write rounds against concurrent adopters.
// Each lost round means another adopter wrote, and epochs only grow, so a few do.
const maxAdoptAttempts = 16

// Adopt adopts epoch in the store recs reaches, by the rule of the package doc, and
// returns the record the backend's writes must carry. store names it in errors.
func Adopt(ctx context.Context, recs Records, store string, epoch uint64) (Record, error) {
	rec, _, err := adopt(ctx, recs, store, epoch)
	return rec, err
}

// adopt is Adopt; joined says the store held epoch already (nothing was written).
func adopt(ctx context.Context, recs Records, store string, epoch uint64) (_ Record, joined bool, _ error) {
	for range maxAdoptAttempts {
		rec, err := recs.ReadEpoch(ctx)
		if err != nil {
			return Record{}, false, fmt.Errorf("adopt epoch %d: read the epoch of %s: %w", epoch, store, err)
		}
		switch {
		case rec.Epoch > epoch:
			return Record{}, false, &StaleError{Store: store, Epoch: epoch, Current: rec.Epoch}
		case rec.Epoch == epoch:
			return rec, true, nil
		}
		rec, err = recs.WriteEpoch(ctx, epoch, rec)
		if err == nil {
			return rec, false, nil
		}
		if !errors.Is(err, ErrMoved) {
			return Record{}, false, fmt.Errorf("adopt epoch %d: advance %s: %w", epoch, store, err)
		}
	}
	return Record{}, false, fmt.Errorf("adopt epoch %d: the epoch of %s changed %d times while advancing it", epoch, store, maxAdoptAttempts)
}

// Held is the record a backend adopted, which its writes carry. The zero Held holds the
// zero Record: a backend that adopted nothing writes only while its store holds no
// epoch either, so a backend that was never told one cannot write past one that was.
// Safe for concurrent use.
type Held struct {
	// turn serializes adoptions, so the held record follows the store's order: a
	// channel of one slot (made on first use, so the zero Held works) rather than a
	// mutex, as a write waiting for an adoption is then a wait the tests can see.
	turn     chan struct{}
	turnOnce sync.Once
	cur      atomic.Pointer[Record]
	// adopting counts the adoptions under way or waiting for their turn (Adopt, Restore), so a
	// write the store holds back meanwhile waits for them rather than guessing a pause
	// (AwaitAdoption).
	adopting atomic.Int32
}

// Load is the record the next write carries.
func (h *Held) Load() Record {
	if r := h.cur.Load(); r != nil {
		return *r
	}
	return Record{}
}

func (h *Held) set(r Record) { h.cur.Store(&r) }

// lock takes the turn of adoptions and judgements; unlock gives it back.
func (h *Held) lock() {
	h.turnOnce.Do(func() { h.turn = make(chan struct{}, 1) })
	h.turn <- struct{}{}
}

func (h *Held) unlock() { <-h.turn }

// Adopt adopts epoch (the package function) and holds the record. A concurrent adopter
// in this process waits; one in another process loses the store's race or wins it.
//
// Under a ctx marked Taken, a store that already holds epoch, which this backend does
// not hold, is a *StaleError (Current == Epoch): the engine took epoch as new, so
// another engine that served under it must be passed, not joined.
func (h *Held) Adopt(ctx context.Context, recs Records, store string, epoch uint64) error {
	h.adopting.Add(1)
	defer h.adopting.Add(-1)
	h.lock()
	defer h.unlock()
	rec, joined, err := adopt(ctx, recs, store, epoch)
	if err != nil {
		return err
	}
	if joined && taken(ctx) && h.Load().Epoch != epoch {
		return &StaleError{Store: store, Epoch: epoch, Current: epoch}
	}
	h.set(rec)
	return nil
}

// Verdict is what a backend does with a write its store refused for its epoch record.
type Verdict uint8

const (
	// Resend: the held record moved on since the write took it (this backend adopted
	// a newer epoch meanwhile, or the store rewrote the record at the held epoch).
	// Send the write once more, with Load.
	Resend Verdict = iota + 1
	// Stale: the store holds a newer epoch (Judge's error is a *StaleError).
	Stale
	// Lost: the store holds an older epoch or none (a *LostError).
	Lost
	// Current: the store's record is the one the write carried, so the epoch was not
	// why it was refused (a two-check write's other check failed).
	Current
)

// Judge reads a write refused by a store whose record it carried as used. It waits
// for an adoption of this backend under way: the store may show that adoption's epoch
// before the backend holds it, and a write refused by it is this backend's own.
func (h *Held) Judge(ctx context.Context, recs Records, store string, used Record) (Verdict, error) {
	h.lock()
	defer h.unlock()
	if h.Load() != used {
		return Resend, nil
	}
	rec, err := recs.ReadEpoch(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the epoch of %s: %w", store, err)
	}
	switch {
	case rec == used:
		return Current, nil
	case rec.Epoch > used.Epoch:
		return Stale, &StaleError{Store: store, Epoch: used.Epoch, Current: rec.Epoch}
	case rec.Epoch == used.Epoch:
		// Rewritten at our epoch (a recreated bucket another engine adopted again):
		// the store says we are current.
		h.set(rec)
		return Resend, nil
	default:
		return Lost, &LostError{Store: store, Epoch: used.Epoch, Current: rec.Epoch}
	}
}

// AwaitAdoption waits for the adoptions of this backend under way, if any, and reports
// whether the held record moved on from used meanwhile. A store holds a write back
// while an adoption's batch is in flight on the subject the write checks (nats-server
// answers "wrong last sequence", undecided); the write then waits for the adoption
// instead of pausing blindly, and goes out again under the new record at once: under the
// old one the store would refuse it anyway. With no adoption under way it returns false
// at once, and the caller pauses as it would.
func (h *Held) AwaitAdoption(used Record) bool {
	if h.adopting.Load() == 0 {
		return false
	}
	h.lock() // an adoption is bounded by its own context
	defer h.unlock()
	return h.Load() != used
}

// Restore adopts the held epoch again when the store lost its record (it holds none, or
// an older epoch), as after a bucket was deleted and recreated; restored says it wrote.
// A store at the held epoch under another revision is taken as it is; one at a newer
// epoch is left alone (writes are fenced). Backends run it when the engine probes them.
func (h *Held) Restore(ctx context.Context, recs Records, store string) (restored bool, err error) {
	h.adopting.Add(1)
	defer h.adopting.Add(-1)
	h.lock()
	defer h.unlock()
	cur := h.Load()
	if cur.Epoch == 0 {
		return false, nil
	}
	rec, err := recs.ReadEpoch(ctx)
	if err != nil {
		return false, fmt.Errorf("read the epoch of %s: %w", store, err)
	}
	switch {
	case rec.Epoch > cur.Epoch:
		return false, nil
	case rec.Epoch == cur.Epoch:
		h.set(rec)
		return false, nil
	}
	rec, err = Adopt(ctx, recs, store, cur.Epoch)
	if err != nil {
		return false, err
	}
	h.set(rec)
	return true, nil
}

type takenKey struct{}

// Taken marks ctx as the adoption of an epoch the engine took as new (a bump, or a
// lease taken over), not one it shares with an engine that drains it (the deferral
// of a clean handover): Held.Adopt then refuses to join a store that holds it already.
func Taken(ctx context.Context) context.Context { return context.WithValue(ctx, takenKey{}, true) }

func taken(ctx context.Context) bool { v, _ := ctx.Value(takenKey{}).(bool); return v }
