package jsepoch

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
)

// repairs collects what r reports it repaired.
func repairs(r *Record) *[]Repair {
	var got []Repair
	r.OnRepair(func(p Repair) { got = append(got, p) })
	return &got
}

// tamper writes B as an operator's tool would: a KV delete or purge marker, a value, or
// the subject purged from the stream.
func tamper(t *testing.T, ctx context.Context, j js.JetStream, how string) {
	t.Helper()
	m := &nats.Msg{Subject: "s.epoch", Header: nats.Header{}}
	switch how {
	case "delete":
		m.Header.Set("KV-Operation", "DEL")
	case "purge":
		m.Header.Set("KV-Operation", "PURGE")
		m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	case "stream-purge":
		st, err := j.Stream(ctx, "S")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Purge(ctx, js.WithPurgeSubject("s.epoch")); err != nil {
			t.Fatal(err)
		}
		return
	default:
		m.Data = []byte(how)
		m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	}
	if _, err := j.PublishMsg(ctx, m); err != nil {
		t.Fatalf("tamper %s: %v", how, err)
	}
}

// B deleted, purged or rewritten under a serving epoch: the reader finds the record on
// the check subjects, writes B again, says so, and the next adoption supersedes the
// epoch whose writes still commit. (Before, a deleted or rewritten B failed every
// adoption for ever, and a B purged from the stream was read as "no epoch": the next
// adoption advanced from none, leaving epoch 1's check standing and its writes
// committing.)
func TestTamperedRecordIsRepaired(t *testing.T) {
	for _, how := range []string{"delete", "purge", "stream-purge", "999", "xyz"} {
		t.Run(how, func(t *testing.T) {
			ctx, j, r := newRecord(t)
			one, err := epoch.Adopt(ctx, r, "S", 1)
			if err != nil {
				t.Fatal(err)
			}
			got := repairs(r)
			tamper(t, ctx, j, how)
			rec, err := r.ReadEpoch(ctx)
			if err != nil || rec != one {
				t.Fatalf("ReadEpoch after B was tampered (%s) = %+v, %v; want %+v", how, rec, err, one)
			}
			if len(*got) != 1 || (*got)[0].Epoch != 1 {
				t.Fatalf("repairs reported = %+v, want one naming epoch 1", *got)
			}
			if m, err := r.last(ctx, "s.epoch"); err != nil || string(m.Data) != "1" {
				t.Fatalf("B after the repair = %v, %v; want 1", m, err)
			}
			two, err := epoch.Adopt(ctx, r, "S", 2)
			if err != nil {
				t.Fatalf("Adopt 2 after the repair: %v", err)
			}
			if err := write(ctx, j, r, one); !jserr.IsConflict(err) {
				t.Fatalf("a write under 1 after 2 = %v, want refused", err)
			}
			if err := write(ctx, j, r, two); err != nil {
				t.Fatalf("a write under 2: %v", err)
			}
		})
	}
}

// Two checks standing at once (B emptied and an adopter that advanced from none): the
// older one is superseded by the reader, so its writes stop committing.
func TestRepairSupersedesOlderLiveChecks(t *testing.T) {
	ctx, j, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	tamper(t, ctx, j, "stream-purge")
	rev := put(t, ctx, j, "s.epoch.3", "3")
	three := epoch.Record{Epoch: 3, Rev: rev}
	got := repairs(r)
	if rec, err := r.ReadEpoch(ctx); err != nil || rec != three {
		t.Fatalf("ReadEpoch = %+v, %v; want %+v", rec, err, three)
	}
	if len(*got) != 1 || !slices.Equal((*got)[0].Superseded, []uint64{1}) {
		t.Fatalf("repairs = %+v, want epoch 1 superseded", *got)
	}
	if err := write(ctx, j, r, one); !jserr.IsConflict(err) {
		t.Fatalf("a write under 1 once 3 is the record = %v, want refused", err)
	}
	if err := write(ctx, j, r, three); err != nil {
		t.Fatalf("a write under 3: %v", err)
	}
}

// A bucket that never held an epoch reads as none, with nothing repaired; a value no
// engine writes, with no check subject to go by, is refused.
func TestNoCheckSubjectsNoRepair(t *testing.T) {
	ctx, j, r := newRecord(t)
	got := repairs(r)
	if rec, err := r.ReadEpoch(ctx); err != nil || rec != (epoch.Record{}) {
		t.Fatalf("ReadEpoch of a fresh stream = %+v, %v; want none", rec, err)
	}
	tamper(t, ctx, j, "delete")
	if rec, err := r.ReadEpoch(ctx); err != nil || rec.Epoch != 0 || rec.Rev == 0 {
		t.Fatalf("ReadEpoch of a deleted B and no checks = %+v, %v; want none, under the marker's revision", rec, err)
	}
	tamper(t, ctx, j, "xyz")
	if _, err := r.ReadEpoch(ctx); err == nil {
		t.Fatal("ReadEpoch of a foreign B and no checks: no error")
	}
	if len(*got) != 0 {
		t.Fatalf("repairs = %+v, want none", *got)
	}
}

// A deleted B over no check subject (an operator's delete before any engine adopted)
// is a store that holds none: an epoch is adopted over the delete marker. (Before, the
// advance from none expected B empty and failed its 16 rounds.)
func TestAdoptOverADeletedRecordWithNoChecks(t *testing.T) {
	ctx, j, r := newRecord(t)
	tamper(t, ctx, j, "delete")
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatalf("Adopt 1 over a deleted B: %v", err)
	}
	if err := write(ctx, j, r, one); err != nil {
		t.Fatalf("a write under 1: %v", err)
	}
	if got, err := r.ReadEpoch(ctx); err != nil || got != one {
		t.Fatalf("ReadEpoch = %+v, %v; want %+v", got, err, one)
	}
}

// An adopter that read no record, and sweeps after another adopted the same epoch from
// none (the race between its read of B and its sweep), leaves that epoch's check as it
// is: before, it marked B.1 as superseded by 1, a marker no read can follow, and every
// later adoption failed naming it.
func TestSweepNeverMarksItsOwnEpoch(t *testing.T) {
	ctx, _, r := newRecord(t)
	one, err := epoch.Adopt(ctx, r, "S", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.sweep(ctx, 1, 0); err != nil {
		t.Fatalf("sweep to 1 over 1's own check: %v", err)
	}
	if got, err := r.ReadEpoch(ctx); err != nil || got != one {
		t.Fatalf("ReadEpoch after the sweep = %+v, %v; want %+v", got, err, one)
	}
}
