package primaries

import (
	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// The backlog is where a call waits while every slot is taken. The micro callback never
// waits itself: a callback that blocks leaves what follows in the subscription's
// pending buffer, which drops messages once full (a slow consumer), and a dropped call
// is never answered. A call that finds the backlog full is refused at once with a
// retryable RESOURCE_EXHAUSTED, so a flood gets an answer for every call it sends
// (issue 15: 1,908 of 3,000 large requests went unanswered).

// Bounds of the backlog: calls, and their bytes, waiting for a slot. The count is
// generous, since a burst of small calls is ordinary traffic (a takeover hands the new
// holder every caller's resent call at once); the bytes are what bound the memory.
const (
	minBacklog        = 4096
	maxBacklogBytes   = 32 << 20
	pendingMsgsLimit  = 262144   // per endpoint subscription, explicit (nats.go: 500,000)
	pendingBytesLimit = 64 << 20 // per endpoint subscription, explicit (nats.go: 64 MiB)
)

// queued is a call in the backlog, with the run it was received in.
type queued struct {
	r *run
	j job
}

// backlogSize is the calls that may wait: sixteen per slot, at least minBacklog.
func backlogSize(maxConcurrent int) int { return max(minBacklog, 16*maxConcurrent) }

// enqueue puts j in the backlog, or refuses it when the backlog is full. The caller
// found every slot taken.
func (p *Primary) enqueue(r *run, j job) {
	n := int64(len(j.req.Data()))
	if p.backlogBytes.Add(n) > maxBacklogBytes {
		p.backlogBytes.Add(-n)
		p.exhausted(r, j)
		return
	}
	select {
	case p.backlog <- queued{r: r, j: j}:
	default:
		p.backlogBytes.Add(-n)
		p.exhausted(r, j)
		return
	}
	// A slot freed between the failed take and the push finds the backlog empty: take
	// it now, so nothing waits while a slot is free.
	select {
	case p.sem <- struct{}{}:
		p.next()
	default:
	}
}

// exhausted refuses a call that found no slot and no room to wait: nothing ran. It runs
// on micro's callback at the rate a flood arrives, so it does the least it can: the
// reply is made once (refusal), it is published here rather than through the reply
// queue (whose leader would have the callback publish the workers' replies too), and
// the call held no slot. A callback that falls behind leaves calls in the
// subscription's pending buffer, which drops them unanswered once full (issue 26:
// 21,526 of 100,000 sets from 20 connections got no reply).
func (p *Primary) exhausted(r *run, j job) {
	p.observe(j, protocol.ResourceExhausted)
	m := nats.Msg{Subject: j.req.Reply(), Header: p.refusal.Header, Data: p.refusal.Data}
	p.publish(&m)
	r.calls.done()
}

// exhaustedReply is the reply of every call exhausted refuses: its header and body are
// shared, read-only, by every such reply.
func exhaustedReply(p *Primary) *nats.Msg {
	return p.errorMsg("", protocol.Exhausted("service %s has all of its %d slots busy and its backlog full (%d calls or %d MiB waiting; nats.max_concurrent_requests); nothing ran, retry after a pause",
		p.svc.Name, cap(p.sem), cap(p.backlog), maxBacklogBytes>>20))
}

// next hands the slot the caller holds to the oldest call waiting, or frees it when
// none waits. The call is dispatched on a goroutine of its own: the caller may be the
// worker publishing replies, which must not wait for a worker. The goroutine ends once
// the call is with a worker or refused, and the call's count in its run (which Stop
// waits for) covers it.
func (p *Primary) next() {
	select {
	case q := <-p.backlog:
		p.handTo(q)
	default:
		p.free()
	}
}

// free frees the slot the caller holds, which it found no call waiting for. A call
// pushed since, which found every slot taken (this one too), leaves it to a holder to
// hand it a slot: so the backlog is looked at again once the slot is free, and a call
// found there gets it back, unless another took it first, whose answer hands it on.
// Freeing without that second look left such a call waiting for the next call to come.
func (p *Primary) free() {
	<-p.sem
	for len(p.backlog) > 0 {
		select {
		case p.sem <- struct{}{}:
		default:
			return
		}
		select {
		case q := <-p.backlog:
			p.handTo(q)
			return
		default: // another holder took it first
			<-p.sem
		}
	}
}

// handTo dispatches q with the slot the caller holds.
func (p *Primary) handTo(q queued) {
	p.backlogBytes.Add(-int64(len(q.j.req.Data())))
	go q.r.dispatch(p, q.j)
}
