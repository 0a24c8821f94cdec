package jsepoch

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
)

// On a replicated stream the server judges one expectation per check subject at a
// time, so writes that all expect B.<N> commit one after another (about one per
// replication round trip, 2,000 a second on a local 3-node cluster whatever the
// concurrency). An epoch written by this version therefore has Shards check subjects
// besides its head B.<N>: B.<N>.0 … B.<N>.<Shards-1>, each holding one check message
// (data N). A write expects the shard its own subject hashes to, at that shard's
// revision, so writes to different keys are judged in parallel and only writes whose
// subjects share a shard wait for each other (a Fence's writes avoid even that:
// claims.go).
//
// The shards are written first, in parallel, each expecting its subject empty (two
// adopters of one epoch write the same data, so either's message serves both), then
// the head, whose check message lists their revisions ("N/r0,r1,…"): the record is
// the head's revision, as before, and the revisions it stands for are read with it
// and kept by the Record for the writes it carries (remember). A record this Record
// did not read is checked on its head, which is as safe: the head is marked before
// the shards. Writing them one message each, not in an atomic batch, keeps a
// handover's pause short on a single-node stream on file storage, which stages each
// batch in a file store it syncs while the bucket's writes wait.
//
// An engine of the unsharded layout refuses such a head as written by something other
// than an engine (its check is "N" alone): it must not advance past a sharded epoch
// by marking the head alone, which would leave the shards, and the writes of a paused
// holder under them, live. Superseding a sharded epoch marks the head (the
// compare-and-swap of an advance, as before) and then every shard, before the next
// epoch's checks are written; a reader that follows the head's marker marks the
// shards again (the marker names how many), so an adopter stopped between the two
// leaves no shard live.
//
// A record of the unsharded layout ("N" on B.<N>) is still read and written as it is:
// its writes expect the head, and the advance past it marks the head alone, which is
// all it has.

// Shards is how many check subjects an epoch written by this version spreads its
// writes over. A power of two well above the concurrency a bucket sees, so two writes
// in flight rarely share one; each costs one small message at every advance.
const Shards = 64

// maxShards bounds the shard count a head's check message may name.
const maxShards = 1024

// shardsHeader is on the marker of a sharded epoch: how many shards it had, so a
// reader that follows the marker can mark them.
const shardsHeader = "Abi-Epoch-Shards"

// shardSubject is B.<n>.<s>.
func (r *Record) shardSubject(n uint64, s uint32) string {
	return r.checkSubject(n) + "." + strconv.FormatUint(uint64(s), 10)
}

// shardOf is the shard a write on subject expects, of shards.
func shardOf(subject string, shards uint32) uint32 {
	h := fnv.New32a()
	h.Write([]byte(subject))
	return h.Sum32() % shards
}

// checkData is the data of epoch n's check message on its head: n, and the revisions
// of its shards.
func checkData(n uint64, revs []uint64) []byte {
	data := strconv.AppendUint(nil, n, 10)
	sep := byte('/')
	for _, rev := range revs {
		data = strconv.AppendUint(append(data, sep), rev, 10)
		sep = ','
	}
	return data
}

// parseCheck reads data as epoch n's check message on its head: the revisions of its
// shards (none for the unsharded layout), and whether it is one.
func parseCheck(n uint64, data []byte) (revs []uint64, ok bool) {
	e, list, sharded := strings.Cut(string(data), "/")
	if e != strconv.FormatUint(n, 10) {
		return nil, false
	}
	if !sharded {
		return nil, true
	}
	for r := range strings.SplitSeq(list, ",") {
		rev, err := strconv.ParseUint(r, 10, 64)
		if err != nil || rev == 0 || r != strconv.FormatUint(rev, 10) || len(revs) == maxShards {
			return nil, false
		}
		revs = append(revs, rev)
	}
	return revs, true
}

// emptyCheck is a check message on subject expecting the subject empty.
func emptyCheck(subject string, data []byte) *nats.Msg {
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	m.Header.Set(js.ExpectedLastSubjSeqHeader, "0")
	return m
}

// settleShards writes epoch n's check message on each of its Shards shards, in
// parallel, unless the shard holds it already, and returns their revisions; ok is
// false when a shard holds something else (a marker: n was superseded meanwhile), and
// the caller reads the head.
func (r *Record) settleShards(ctx context.Context, n uint64) (revs []uint64, ok bool, err error) {
	revs = make([]uint64, Shards)
	errs := make([]error, Shards)
	others := make([]bool, Shards)
	data := strconv.AppendUint(nil, n, 10)
	var wg sync.WaitGroup
	for s := range uint32(Shards) {
		wg.Go(func() {
			subject := r.shardSubject(n, s)
			seq, err := r.publish(ctx, emptyCheck(subject, data))
			if err == nil || !jserr.IsConflict(err) {
				revs[s], errs[s] = seq, err
				return
			}
			m, err := r.last(ctx, subject)
			switch {
			case err != nil:
				errs[s] = err
			case m == nil:
				errs[s] = errors.New("refused as not empty, then read as empty")
			case string(m.Data) == string(data):
				revs[s] = m.Sequence
			default:
				others[s] = true
			}
		})
	}
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			return nil, false, fmt.Errorf("write the check of epoch %d on its shard %s: %w", n, r.shardSubject(n, uint32(s)), err)
		}
	}
	for _, o := range others {
		if o {
			return nil, false, nil
		}
	}
	return revs, true, nil
}

// known is a record and the revisions of its shards, as read or written.
type known struct {
	rec  epoch.Record
	revs []uint64
}

// maxKnown bounds the records the Record keeps the shards of: the one held, the one
// being adopted, and what a refused write's judgement read.
const maxKnown = 4

// remember keeps the shard revisions of rec for Check, and returns rec. What was read
// last wins: a bucket deleted and recreated may hold the same epoch at the same head
// revision again, with its shards at other revisions.
func (r *Record) remember(rec epoch.Record, revs []uint64) epoch.Record {
	if len(revs) == 0 || slices.Equal(r.revsOf(rec), revs) {
		return rec
	}
	r.knownMu.Lock()
	defer r.knownMu.Unlock()
	var next []known
	if cur := r.known.Load(); cur != nil {
		for _, k := range (*cur)[max(0, len(*cur)-maxKnown+1):] {
			if k.rec != rec {
				next = append(next, k)
			}
		}
	}
	next = append(next, known{rec: rec, revs: revs})
	r.known.Store(&next)
	return rec
}

// revsOf is the shard revisions of rec; nil when rec is unsharded or was not read or
// written through this Record.
func (r *Record) revsOf(rec epoch.Record) []uint64 {
	if cur := r.known.Load(); cur != nil {
		for _, k := range *cur {
			if k.rec == rec {
				return k.revs
			}
		}
	}
	return nil
}

// markShards writes next's marker on every shard of epoch k, unconditionally: a shard
// only ever holds k's check or k's marker, so the write replaces nothing a newer epoch
// wrote. The shards are written in parallel and
// all acknowledged before it returns; writes under k expecting them are refused from
// then on.
func (r *Record) markShards(ctx context.Context, k uint64, shards uint32, next uint64) error {
	if shards == 0 {
		return nil
	}
	errs := make([]error, shards)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Go(func() {
			m := &nats.Msg{Subject: r.shardSubject(k, s), Header: nats.Header{}}
			m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
			m.Header.Set(supersededBy, strconv.FormatUint(next, 10))
			_, errs[s] = r.publish(ctx, m)
		})
	}
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			return fmt.Errorf("supersede epoch %d on its check shard %s: %w", k, r.shardSubject(k, uint32(s)), err)
		}
	}
	return nil
}
