package epoch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// memRecords is a store's epoch record in memory, with a hook that runs between a
// read and the write that follows it, as a concurrent adopter in another process would.
type memRecords struct {
	mu      sync.Mutex
	rec     Record
	rev     uint64
	reads   int
	writes  int
	between func() // runs once, after the next read
}

func (m *memRecords) ReadEpoch(context.Context) (Record, error) {
	m.mu.Lock()
	rec := m.rec
	m.reads++
	hook := m.between
	m.between = nil
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
	return rec, nil
}

func (m *memRecords) WriteEpoch(_ context.Context, epoch uint64, over Record) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec != over {
		return Record{}, fmt.Errorf("conditional write: %w", ErrMoved)
	}
	m.rev += 10
	m.writes++
	m.rec = Record{Epoch: epoch, Rev: m.rev}
	return m.rec, nil
}

func (m *memRecords) force(epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rev += 10
	m.rec = Record{Epoch: epoch, Rev: m.rev}
	if epoch == 0 {
		m.rec = Record{}
	}
}

const store = "test store"

func TestAdoptRule(t *testing.T) {
	ctx := context.Background()
	m := &memRecords{}
	rec, err := Adopt(ctx, m, store, 3)
	if err != nil || rec.Epoch != 3 || m.writes != 1 {
		t.Fatalf("adopt 3 on an empty store = %+v, %v (%d writes); want it advanced", rec, err, m.writes)
	}
	again, err := Adopt(ctx, m, store, 3)
	if err != nil || again != rec || m.writes != 1 {
		t.Fatalf("adopt 3 at 3 = %+v, %v (%d writes); want the record used as it is", again, err, m.writes)
	}
	_, err = Adopt(ctx, m, store, 2)
	var stale *StaleError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &stale) || stale.Epoch != 2 || stale.Current != 3 {
		t.Fatalf("adopt 2 at 3 = %v; want a StaleError 2 < 3 matching ErrFenced", err)
	}
	if rec, err := Adopt(ctx, m, store, 7); err != nil || rec.Epoch != 7 {
		t.Fatalf("adopt 7 at 3 = %+v, %v", rec, err)
	}
}

// An adopter that loses the race to a higher epoch fails as stale; one that loses it
// to a lower epoch advances over it.
func TestAdoptRacesAnotherAdopter(t *testing.T) {
	ctx := context.Background()
	m := &memRecords{}
	m.between = func() { m.force(5) }
	if _, err := Adopt(ctx, m, store, 4); !errors.Is(err, ErrFenced) {
		t.Fatalf("adopt 4 while another advanced to 5 = %v, want fenced", err)
	}
	m.between = func() { m.force(6) }
	if rec, err := Adopt(ctx, m, store, 8); err != nil || rec.Epoch != 8 {
		t.Fatalf("adopt 8 while another advanced to 6 = %+v, %v; want 8", rec, err)
	}
	m.between = func() { m.force(9) }
	if rec, err := Adopt(ctx, m, store, 9); err != nil || rec.Epoch != 9 || m.rec != rec {
		t.Fatalf("adopt 9 while another advanced to 9 = %+v, %v; want the other's record", rec, err)
	}
}

func TestJudge(t *testing.T) {
	ctx := context.Background()
	m := &memRecords{}
	var h Held
	if err := h.Adopt(ctx, m, store, 2); err != nil {
		t.Fatal(err)
	}
	used := h.Load()

	if v, err := h.Judge(ctx, m, store, used); v != Current || err != nil {
		t.Fatalf("Judge with the store's record = %v, %v; want Current", v, err)
	}
	if err := h.Adopt(ctx, m, store, 3); err != nil {
		t.Fatal(err)
	}
	if v, err := h.Judge(ctx, m, store, used); v != Resend || err != nil {
		t.Fatalf("Judge after this backend adopted 3 = %v, %v; want Resend", v, err)
	}
	used = h.Load()
	m.force(4)
	v, err := h.Judge(ctx, m, store, used)
	var stale *StaleError
	if v != Stale || !errors.As(err, &stale) || stale.Epoch != 3 || stale.Current != 4 || !errors.Is(err, ErrFenced) {
		t.Fatalf("Judge with the store at 4 = %v, %v; want Stale 3 < 4", v, err)
	}

	// The store rewritten at the held epoch (a recreated bucket adopted again).
	var h2 Held
	if err := h2.Adopt(ctx, m, store, 4); err != nil {
		t.Fatal(err)
	}
	used = h2.Load()
	m.force(4)
	if v, err := h2.Judge(ctx, m, store, used); v != Resend || err != nil || h2.Load() != m.rec {
		t.Fatalf("Judge with the record rewritten at 4 = %v, %v, holding %+v; want Resend with the store's %+v", v, err, h2.Load(), m.rec)
	}

	// The store lost its record.
	used = h2.Load()
	m.force(0)
	v, err = h2.Judge(ctx, m, store, used)
	var lost *LostError
	if v != Lost || !errors.As(err, &lost) || !errors.Is(err, ErrLost) || errors.Is(err, ErrFenced) || lost.Current != 0 {
		t.Fatalf("Judge with no record = %v, %v; want Lost", v, err)
	}

	// A backend that adopted nothing, against a store that holds an epoch: stale.
	var none Held
	if v, err := none.Judge(ctx, m, store, Record{}); v != Current || err != nil {
		t.Fatalf("Judge of no epoch against no record = %v, %v; want Current", v, err)
	}
	m.force(1)
	if v, err := none.Judge(ctx, m, store, Record{}); v != Stale || !errors.Is(err, ErrFenced) {
		t.Fatalf("Judge of no epoch against epoch 1 = %v, %v; want Stale", v, err)
	}
}

func TestRestore(t *testing.T) {
	ctx := context.Background()
	m := &memRecords{}
	var h Held
	if restored, err := h.Restore(ctx, m, store); restored || err != nil || m.reads != 0 {
		t.Fatalf("Restore holding nothing = %v, %v (%d reads); want nothing done", restored, err, m.reads)
	}
	if err := h.Adopt(ctx, m, store, 5); err != nil {
		t.Fatal(err)
	}
	if restored, err := h.Restore(ctx, m, store); restored || err != nil {
		t.Fatalf("Restore with the record in place = %v, %v", restored, err)
	}
	m.force(0)
	if restored, err := h.Restore(ctx, m, store); !restored || err != nil || m.rec.Epoch != 5 || h.Load() != m.rec {
		t.Fatalf("Restore after the record was lost = %v, %v, store %+v, held %+v; want 5 written and held", restored, err, m.rec, h.Load())
	}
	m.force(3)
	if restored, err := h.Restore(ctx, m, store); !restored || err != nil || m.rec.Epoch != 5 {
		t.Fatalf("Restore over an older epoch = %v, %v, store %+v; want 5", restored, err, m.rec)
	}
	m.force(6)
	if restored, err := h.Restore(ctx, m, store); restored || err != nil || m.rec.Epoch != 6 {
		t.Fatalf("Restore under a newer epoch = %v, %v, store %+v; want it left alone", restored, err, m.rec)
	}
}

type wireError struct{ msg string }

func (e *wireError) Error() string { return e.msg }

func TestRefusedKeepsTheWireError(t *testing.T) {
	wire := &wireError{"UNAVAILABLE: refused"}
	err := Refused(wire, &StaleError{Store: "s", Epoch: 1, Current: 2})
	var got *wireError
	var stale *StaleError
	if !errors.Is(err, ErrFenced) || !errors.As(err, &got) || got != wire || !errors.As(err, &stale) || err.Error() != wire.msg {
		t.Fatalf("Refused(wire, stale) = %v; want it to match ErrFenced and the StaleError, wrap wire and read as wire", err)
	}
	if err := Refused(wire, &LostError{Store: "s", Epoch: 2}); !errors.Is(err, ErrLost) || errors.Is(err, ErrFenced) {
		t.Fatalf("Refused(wire, lost) = %v; want it to match ErrLost only", err)
	}
	if msg := (&StaleError{Store: "JetStream bucket B", Epoch: 0, Current: 2}).Error(); msg != "JetStream bucket B is at epoch 2, newer than this engine's (it adopted none): another engine took over" {
		t.Fatalf("StaleError message %q", msg)
	}
}

// Finding 3 of issue 26: an engine that took epoch N as new (its lease's epoch record
// was lost, so it counted from nothing) must not join a store another engine adopted N
// in: that engine may still be writing under N. A clean handover's deferral (not
// Taken) joins it, and a backend that holds N already re-adopts it.
func TestTakenEpochIsNeverJoined(t *testing.T) {
	ctx := context.Background()
	recs := &memRecords{}
	var old, successor, deferring Held
	if err := old.Adopt(ctx, recs, "store", 1); err != nil {
		t.Fatal(err)
	}
	var stale *StaleError
	err := successor.Adopt(Taken(ctx), recs, "store", 1)
	if !errors.As(err, &stale) || stale.Current != 1 || stale.Epoch != 1 || !errors.Is(err, ErrFenced) {
		t.Fatalf("a taken epoch the store holds already: %v, want a *StaleError at 1", err)
	}
	if successor.Load() != (Record{}) {
		t.Fatalf("the refused adoption holds %+v", successor.Load())
	}
	if err := deferring.Adopt(ctx, recs, "store", 1); err != nil {
		t.Fatalf("the deferral joins the draining engine's epoch: %v", err)
	}
	if err := old.Adopt(Taken(ctx), recs, "store", 1); err != nil {
		t.Fatalf("a backend that holds the epoch adopts it again: %v", err)
	}
	if err := successor.Adopt(Taken(ctx), recs, "store", 2); err != nil {
		t.Fatalf("past it: %v", err)
	}
}
