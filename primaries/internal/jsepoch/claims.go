package jsepoch

import (
	"math/bits"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/epoch"
)

// On a replicated stream the server judges one expectation per check subject at a
// time and answers a second write expecting the same subject 10164, undecided: it is
// sent again after a pause. Hashing each write's subject to a shard leaves two writes
// in flight on one shard as often as two of them hash alike (on a local 3-node cluster
// under load, 6 % of an engine's sets at 16 requesters and about half at 128, where 64
// are in flight), and each such write pays a refusal, a pause and a resend. So a
// Fence's writes claim their shard: a write takes the shard its subject hashes to when
// no other write of this Fence is in flight on it, else the next free one, and gives
// it back once answered. Writes of one engine then never meet each other at the store
// while no more than the epoch's shards are in flight.
//
// Which shard a write expects changes nothing of what its check proves: every shard
// of an epoch holds that epoch's check message until the advance past it marks them
// all, so a write expecting any of them is stored only while the epoch is current.

// claimable is how many shards of an epoch a Fence tracks as in flight: those a bitmap
// of one word holds. Shards beyond them (a record written with more) are expected by
// hash alone.
const claimable = 64

// inFlight is the set of shards a Fence has writes in flight on, one bit per shard.
type inFlight struct{ bits atomic.Uint64 }

// take claims the first free shard of shards from want on, wrapping around, and
// returns it; want itself, unclaimed, when every shard is taken or shards is beyond
// what the set tracks.
func (f *inFlight) take(want, shards uint32) (shard uint32, claimed bool) {
	if shards > claimable {
		return want, false
	}
	all := uint64(1)<<shards - 1
	if shards == claimable {
		all = ^uint64(0)
	}
	for {
		cur := f.bits.Load()
		free := ^cur & all
		if free == 0 {
			return want, false
		}
		// The first free bit at or after want, else the first free one.
		s := uint32(bits.TrailingZeros64(free >> want << want))
		if s >= shards {
			s = uint32(bits.TrailingZeros64(free))
		}
		if f.bits.CompareAndSwap(cur, cur|1<<s) {
			return s, true
		}
	}
}

// give releases shard s.
func (f *inFlight) give(s uint32) {
	f.bits.And(^(uint64(1) << s))
}

// Token is what one write carries: the record it is sent under, and the shard it
// claimed for its check (a zero claim: the shard its subject hashes to).
type Token struct {
	epoch.Record
	claim *claim
}

// claim is one write's hold on a shard of its Fence, from its first send to its answer.
type claim struct {
	set   *inFlight
	shard uint32
	held  bool
}

// shardFor is the shard the write checks of shards, want being its subject's: the one
// it holds when that is one of them, else one it claims now.
func (c *claim) shardFor(want, shards uint32) uint32 {
	if c == nil {
		return want
	}
	if c.held {
		if c.shard < shards {
			return c.shard
		}
		c.release() // a record with fewer shards than the one it claimed under
	}
	c.shard, c.held = c.set.take(want, shards)
	return c.shard
}

// release gives the claimed shard back.
func (c *claim) release() {
	if c.held {
		c.set.give(c.shard)
		c.held = false
	}
}

// checkClaimed is CheckAs for a write holding c.
func (r *Record) checkClaimed(m *nats.Msg, rec epoch.Record, subject string, c *claim) {
	revs := r.revsOf(rec)
	if len(revs) == 0 {
		r.checkHead(m, rec)
		return
	}
	n := uint32(len(revs))
	s := c.shardFor(shardOf(subject, n), n)
	r.expect(m, r.shardSubject(rec.Epoch, s), revs[s])
}
