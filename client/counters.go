package client

import (
	"errors"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// Counters counts what a Transport did, for the engine's metrics to expose. It is safe
// for concurrent use and may be shared by several transports (WithCounters).
type Counters struct {
	calls        atomic.Uint64
	retries      atomic.Uint64
	giveUps      atomic.Uint64
	noResponders atomic.Uint64
	resends      atomic.Uint64
	failures     map[protocol.Code]*atomic.Uint64 // one per protocol.Codes, fixed at creation
}

// Stats is a snapshot of Counters.
type Stats struct {
	// Calls is the number of Request calls; an Upload or a Download counts as one.
	Calls uint64
	// Retries is the number of attempts resent after "no responders" or a fenced engine.
	Retries uint64
	// GiveUps is the number of calls that retried for their whole window and still
	// reached nobody who ran them.
	GiveUps uint64
	// NoResponders is the number of attempts the broker answered "no responders": no
	// engine subscribed the subject when the request reached it. On an engine subject
	// each is followed by a retry (or ends the call at the end of its window), so a
	// handover that leaves no gap between the old engine's subscriptions and the new
	// one's keeps it at 0.
	NoResponders uint64
	// OverflowResends is the number of keyvalue gets (KeyValue.Get, Transport.Call)
	// sent again with the overflow header because the engine's reply did not fit one
	// message: each read the value twice. Many mean values near the broker's max payload.
	OverflowResends uint64
	// Failures counts failed calls by code; every code of protocol.Codes is present.
	// A code this client does not know counts as INTERNAL.
	Failures map[protocol.Code]uint64
}

// NewCounters returns zeroed counters.
func NewCounters() *Counters {
	c := &Counters{failures: make(map[protocol.Code]*atomic.Uint64, len(protocol.Codes))}
	for _, code := range protocol.Codes {
		c.failures[code] = new(atomic.Uint64)
	}
	return c
}

// Snapshot reads every counter. Counters move independently, so a snapshot taken while
// calls run may see a retry whose call it does not yet count as failed.
func (c *Counters) Snapshot() Stats {
	s := Stats{
		Calls:           c.calls.Load(),
		Retries:         c.retries.Load(),
		GiveUps:         c.giveUps.Load(),
		NoResponders:    c.noResponders.Load(),
		OverflowResends: c.resends.Load(),
		Failures:        make(map[protocol.Code]uint64, len(c.failures)),
	}
	for code, n := range c.failures {
		s.Failures[code] = n.Load()
	}
	return s
}

// sawNoResponders counts an attempt the broker answered "no responders" (err is the
// attempt's error, nil for a reply).
func (c *Counters) sawNoResponders(err error) {
	if errors.Is(err, nats.ErrNoResponders) {
		c.noResponders.Add(1)
	}
}

func (c *Counters) fail(code protocol.Code) {
	n, ok := c.failures[code]
	if !ok {
		n = c.failures[protocol.Internal]
	}
	n.Add(1)
}
