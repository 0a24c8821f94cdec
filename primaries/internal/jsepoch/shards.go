package jsepoch

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// On a replicated stream the server judges one expectation per check subject at a
// time, so writes that all expect B.<N> commit one after another (about one per
// replication round trip, 2,000 a second on a local 3-node cluster whatever the
// concurrency). An epoch written by this version therefore has Shards check subjects
// besides its head B.<N>: B.<N>.0 … B.<N>.<Shards-1>. A write expects the shard its
// own subject hashes to, so writes to different keys are judged in parallel and only
// writes whose subjects share a shard wait for each other.
//
// The shards and the head are written in one atomic batch, shards first, so their
// stream sequences are consecutive: the record keeps one revision (the head's, Rev)
// and shard s stands at Rev-Shards+s. The head's check message says how many shards
// there are ("N/64"), which an engine of the unsharded layout refuses as written by
// something other than an engine: it must not advance past a sharded epoch by marking
// the head alone, which would leave the shards, and the writes of a paused holder
// under them, live. Superseding a sharded epoch marks the head (the compare-and-swap
// of an advance, as before) and then every shard, before the next epoch's check is
// written; a reader that follows the head's marker marks the shards again (the
// marker names how many), so an adopter stopped between the two leaves no shard live.
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

// checkData is the data of epoch n's check message on its head.
func checkData(n uint64, shards uint32) []byte {
	data := strconv.AppendUint(nil, n, 10)
	if shards == 0 {
		return data
	}
	return strconv.AppendUint(append(data, '/'), uint64(shards), 10)
}

// parseCheck reads data as epoch n's check message: the shard count, and whether it
// is one.
func parseCheck(n uint64, data []byte) (shards uint32, ok bool) {
	e, c, sharded := strings.Cut(string(data), "/")
	if e != strconv.FormatUint(n, 10) {
		return 0, false
	}
	if !sharded {
		return 0, true
	}
	k, err := strconv.ParseUint(c, 10, 32)
	if err != nil || k == 0 || k > maxShards || c != strconv.FormatUint(k, 10) {
		return 0, false
	}
	return uint32(k), true
}

// checkBatch is epoch n's check messages, shards first and the head last, each
// expecting its subject empty.
func (r *Record) checkBatch(n uint64, shards uint32) []*nats.Msg {
	msgs := make([]*nats.Msg, 0, shards+1)
	for s := range shards {
		msgs = append(msgs, r.emptyCheck(r.shardSubject(n, s), strconv.AppendUint(nil, n, 10)))
	}
	return append(msgs, r.emptyCheck(r.checkSubject(n), checkData(n, shards)))
}

func (r *Record) emptyCheck(subject string, data []byte) *nats.Msg {
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	m.Header.Set(js.ExpectedLastSubjSeqHeader, "0")
	return m
}

// markShards writes next's marker on every shard of epoch k, unconditionally: a shard
// only ever holds k's check or k's marker, and is marked only once k's head is, so the
// write replaces nothing a newer epoch wrote. The shards are written in parallel and
// all acknowledged before it returns; writes under k expecting them are refused from
// then on.
func (r *Record) markShards(ctx context.Context, k uint64, shards uint32, next uint64) error {
	if shards == 0 {
		return nil
	}
	errs := make([]error, shards)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &nats.Msg{Subject: r.shardSubject(k, s), Header: nats.Header{}}
			m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
			m.Header.Set(supersededBy, strconv.FormatUint(next, 10))
			_, errs[s] = r.publish(ctx, m)
		}()
	}
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			return fmt.Errorf("supersede epoch %d on its check shard %s: %w", k, r.shardSubject(k, uint32(s)), err)
		}
	}
	return nil
}
