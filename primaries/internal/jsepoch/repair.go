package jsepoch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
)

// A record whose B was deleted (a KV delete or purge marker, or the subject purged
// from the stream) or rewritten (a value that is not an epoch, or an epoch whose check
// subject never held a check) does not say where the bucket stands. The check subjects
// do: they are what writes look at, and nothing but an engine writes them. So a
// reader that finds B unusable reads every check subject (recover) rather than
// trusting B or giving up, which left an adopter retrying for ever (an outage every
// probe called healthy), or, with B empty, advancing from none while the previous
// epoch's check still stood and its writes still committed.
//
// Of the check subjects, the one holding a check message with the highest epoch is the
// record. Every other one still holding a check is a previous epoch whose writes could
// still commit: it is superseded (a marker naming the record's epoch, expecting the
// check's revision) before the record is returned, so a repair never lets an older
// epoch write. Then B is written again, naming the record, expecting its check
// unchanged (as an advance's last step). A check subject holding anything else is
// refused, naming it, as before: something other than an engine wrote it.

// maxRecoverRounds bounds recover's scans: each further round means an adopter moved
// the record while this one read it.
const maxRecoverRounds = 6

// firstRecoverPause is the pause before recover's second scan, doubled before each
// later one (2, 4, 8, 16, 32 ms): time for an adopter caught between its shards and
// its head to write the head (scan's patience).
const firstRecoverPause = 2 * time.Millisecond

// Repair says what a reader found wrong with B and what it did about it; the backend
// logs it (a repair is never silent).
type Repair struct {
	// Found is what B held: "deleted", "purged", "empty", "\"xyz\", not an epoch",
	// "epoch 999, whose check subject is empty".
	Found string
	// Epoch is the record found on the check subjects and written to B again.
	Epoch uint64
	// Superseded are the epochs whose check messages still stood below it.
	Superseded []uint64
}

func (p Repair) String() string {
	s := fmt.Sprintf("the epoch record was %s; the check subjects say epoch %d, written back", p.Found, p.Epoch)
	if len(p.Superseded) > 0 {
		s += fmt.Sprintf("; superseded epochs %v whose checks still stood (their writes are refused from now on)", p.Superseded)
	}
	return s
}

// OnRepair sets the function told of every repair (nil: none). Set it before the
// record is used.
func (r *Record) OnRepair(f func(Repair)) { r.repaired = f }

// found describes m, B's last message, when it names no epoch; ok is false when it does.
func found(m *js.RawStreamMsg) (what string, n uint64, ok bool) {
	if m == nil {
		return "empty", 0, false
	}
	switch m.Header.Get("KV-Operation") {
	case "DEL":
		return "deleted", 0, false
	case "PURGE":
		return "purged", 0, false
	}
	n, err := strconv.ParseUint(string(m.Data), 10, 64)
	if err != nil || n == 0 {
		return fmt.Sprintf("%.32q (sequence %d), not an epoch", m.Data, m.Sequence), 0, false
	}
	return "", n, true
}

// recover finds the record on the check subjects when B (described by what) does not
// name a usable one; fallback is what ReadEpoch returns when no check subject exists
// at all (a bucket that never held an epoch, or B naming one whose check was removed).
func (r *Record) recover(ctx context.Context, what string, fallback epoch.Record, fallbackErr error) (epoch.Record, error) {
	pause := firstRecoverPause
	for round := range maxRecoverRounds {
		rec, rep, err := r.scan(ctx, what, round < maxRecoverRounds-1)
		switch {
		case errors.Is(err, epoch.ErrMoved):
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return epoch.Record{}, ctx.Err()
			case <-t.C:
			}
			pause *= 2
			continue
		case err != nil:
			return epoch.Record{}, err
		case rec.Epoch == 0:
			return fallback, fallbackErr
		}
		if r.repaired != nil {
			r.repaired(rep)
		}
		return rec, nil
	}
	return epoch.Record{}, fmt.Errorf("the epoch record %s was %s and its check subjects changed %d times while being read", r.base, what, maxRecoverRounds)
}

// scan reads every check subject, supersedes the live checks below the highest, and
// writes B again. The zero Record: no check subject exists.
//
// Shards of an epoch above the highest head, with no head of their own, are most often
// an adopter between its shards and its head (advance's step 0, or an adoption from no
// record before its batch), whose writes would all be refused if scan marked them.
// While patient, scan leaves everything as it is and answers ErrMoved, so recover reads
// again once the head is there; an adopter that never writes it (it stopped, or its
// head was removed by hand) has its shards marked by the last round, so no write under
// them commits.
func (r *Record) scan(ctx context.Context, what string, patient bool) (epoch.Record, Repair, error) {
	rep := Repair{Found: what}
	epochs, shards, err := r.checkEpochs(ctx)
	if err != nil || len(epochs) == 0 {
		return epoch.Record{}, rep, err
	}
	var live []slot
	var headless []uint64
	top := slot{}
	for _, n := range epochs {
		m, err := r.last(ctx, r.checkSubject(n))
		if err != nil {
			return epoch.Record{}, rep, fmt.Errorf("read the epoch check subject %s: %w", r.checkSubject(n), err)
		}
		if m == nil {
			headless = append(headless, n) // its shards are marked below, or waited for
			continue
		}
		s, err := r.slotOf(n, m)
		if err != nil {
			return epoch.Record{}, rep, err
		}
		if s.check {
			live = append(live, s)
		}
		if named(s) > named(top) || (named(s) == named(top) && s.check) {
			top = s
		}
	}
	if top.epoch == 0 {
		// Shards and no head anywhere: an adopter from no record between writing its
		// shards and its batch. It has opened nothing yet, and there is no record to
		// write back (settling "epoch 0" would write on B itself); an adoption from
		// none sweeps such shards when it goes past them.
		return epoch.Record{}, rep, nil
	}
	// The highest epoch named: a live check, or a marker naming a subject past every
	// check (an advance stopped after its first step), which settle completes.
	for hops := 0; !top.check; hops++ {
		if hops == maxHops {
			return epoch.Record{}, rep, fmt.Errorf("the epoch check subjects of %s: more than %d superseded epochs in a row", r.base, maxHops)
		}
		if top, err = r.pass(ctx, top); err != nil {
			return epoch.Record{}, rep, err
		}
	}
	if patient && slices.ContainsFunc(headless, func(n uint64) bool { return n > top.epoch }) {
		return epoch.Record{}, rep, fmt.Errorf("%s: an adoption past epoch %d is under way: %w", r.base, top.epoch, epoch.ErrMoved)
	}
	for _, s := range live {
		if s.epoch == top.epoch {
			continue
		}
		if err := r.supersede(ctx, s.epoch, top.epoch); err != nil {
			return epoch.Record{}, rep, err
		}
		rep.Superseded = append(rep.Superseded, s.epoch)
	}
	// Every shard of an epoch below the record is marked, whatever its head holds: a
	// marker written by hand, or a head removed, says nothing of its shards.
	for _, n := range epochs {
		if n != top.epoch && shards[n] > 0 {
			if err := r.markShards(ctx, n, shards[n], top.epoch); err != nil {
				return epoch.Record{}, rep, err
			}
		}
	}
	rec := r.recordOf(top)
	current := &nats.Msg{Subject: r.base, Data: strconv.AppendUint(nil, top.epoch, 10), Header: nats.Header{}}
	current.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	r.checkHead(current, rec)
	if _, err := r.publish(ctx, current); err != nil {
		if jserr.IsConflict(err) {
			// The record's check moved (an adopter advanced it): read again.
			return epoch.Record{}, rep, fmt.Errorf("%s: %w (%v)", r.base, epoch.ErrMoved, err)
		}
		return epoch.Record{}, rep, fmt.Errorf("write %s back: %w", r.base, err)
	}
	rep.Epoch = top.epoch
	return rec, rep, nil
}

// named is the epoch a slot stands for: its own while it holds the check, else the one
// that superseded it.
func named(s slot) uint64 {
	if s.check {
		return s.epoch
	}
	return s.next
}

// checkEpochs lists the epochs that have a check subject (B.<N>, or a shard B.<N>.<s>)
// in the stream, ascending, and for those with shards, one more than the highest shard
// found.
func (r *Record) checkEpochs(ctx context.Context) ([]uint64, map[uint64]uint32, error) {
	subjects, err := r.subjects(ctx, r.base+".>")
	if err != nil {
		return nil, nil, err
	}
	seen := map[uint64]bool{}
	shards := map[uint64]uint32{}
	for subj := range subjects {
		e, shard, sharded := strings.Cut(strings.TrimPrefix(subj, r.base+"."), ".")
		n, err := strconv.ParseUint(e, 10, 64)
		var k uint64
		if err == nil && sharded {
			k, err = strconv.ParseUint(shard, 10, 32)
			if err == nil && k >= maxShards {
				err = errors.New("out of range")
			}
		}
		if err != nil || n == 0 {
			return nil, nil, fmt.Errorf("the subject %s is under the epoch record %s but names no epoch: it was written by something other than an engine", subj, r.base)
		}
		seen[n] = true
		if sharded {
			shards[n] = max(shards[n], uint32(k)+1)
		}
	}
	epochs := slices.Sorted(maps.Keys(seen))
	return epochs, shards, nil
}

// LogRepair returns what a store gives OnRepair: one warning per repair, naming the
// service and the bucket (nil log: none).
func LogRepair(log *zap.Logger, service, bucket string) func(Repair) {
	if log == nil {
		return nil
	}
	return func(p Repair) {
		log.Warn("the bucket's epoch record was deleted or rewritten from outside: repaired from its check subjects",
			zap.String("service", service), zap.String("bucket", bucket), zap.String("found", p.Found),
			zap.Uint64("epoch", p.Epoch), zap.Uint64s("superseded", p.Superseded), zap.Stringer("repair", p))
	}
}

// subjects lists the subjects of the stream matching filter.
func (r *Record) subjects(ctx context.Context, filter string) (map[string]uint64, error) {
	// A handle of its own: Info replaces a handle's cached configuration, and the
	// record's handle must keep reading the way it was bound (package jsread).
	st, err := r.js.Stream(ctx, r.stream.CachedInfo().Config.Name)
	if err != nil {
		return nil, fmt.Errorf("list the epoch check subjects %s: %w", filter, err)
	}
	info, err := st.Info(ctx, js.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("list the epoch check subjects %s: %w", filter, err)
	}
	return info.State.Subjects, nil
}

// shardsListed is one more than the highest check shard of epoch k in the stream; 0
// when it has none.
func (r *Record) shardsListed(ctx context.Context, k uint64) (uint32, error) {
	subjects, err := r.subjects(ctx, r.checkSubject(k)+".*")
	if err != nil {
		return 0, err
	}
	var n uint32
	for subj := range subjects {
		s, err := strconv.ParseUint(strings.TrimPrefix(subj, r.checkSubject(k)+"."), 10, 32)
		if err != nil || s >= maxShards {
			return 0, fmt.Errorf("the subject %s is under the epoch check subject %s but names no shard: it was written by something other than an engine", subj, r.checkSubject(k))
		}
		n = max(n, uint32(s)+1)
	}
	return n, nil
}
