package sessions

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// Budget is the memory every transfer session and parked reply of an engine holds
// together, and each client's share of it. One Budget serves every TransferHost of an
// engine (the object-storage transfers and the overflow host), so the engine's memory
// for sessions has one bound whatever the traffic, and one client that fills its share
// leaves the rest to the others.
//
// A client is the connection a call came from, as NATS tells the engine: the reply
// subject's inbox prefix (ClientOf). A caller that forges inboxes can pose as many
// clients; the engine-wide bound still holds, and NATS subscribe permissions on
// _INBOX prefixes (docs/security.md) make the identity one the broker enforces.
//
// Its methods are safe for concurrent use and never block beyond a short mutex: host
// actors call them in Receive.
type Budget struct {
	total, perClient int64

	mu      sync.Mutex
	used    int64
	peak    int64 // the most used since memory was last handed back
	clients map[string]int64

	trim chan struct{} // signalled when much of the peak has been given back
}

// trimFloor is the peak below which giving bytes back does not ask the runtime to
// return memory to the system: a full collection costs more than it saves.
const trimFloor = 16 << 20

// NewBudget bounds sessions to total bytes together and perClient bytes per client
// (0: total).
func NewBudget(total, perClient int64) *Budget {
	if perClient <= 0 || perClient > total {
		perClient = total
	}
	return &Budget{total: total, perClient: perClient, clients: map[string]int64{}, trim: make(chan struct{}, 1)}
}

// Total is the engine-wide bound in bytes.
func (b *Budget) Total() int64 { return b.total }

// PerClient is one client's share in bytes.
func (b *Budget) PerClient() int64 { return b.perClient }

// Used is what the sessions hold now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// take reserves n bytes for client, or refuses with RESOURCE_EXHAUSTED (retryable:
// nothing ran, and memory comes back as sessions end).
func (b *Budget) take(client string, n int64) error {
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.clients[client]; c+n > b.perClient {
		return protocol.Exhausted("this client's transfer sessions hold %d bytes; %d more would pass its share of %d (limits.client_memory_mib); close or finish a session and retry", c, n, b.perClient)
	}
	if b.used+n > b.total {
		return protocol.Exhausted("the engine's transfer sessions hold %d bytes; %d more would pass the engine's budget of %d (limits.memory_mib); retry later", b.used, n, b.total)
	}
	b.used += n
	b.clients[client] += n
	b.peak = max(b.peak, b.used)
	return nil
}

// give hands n bytes of client back. When the sessions have given back most of what
// they held at their peak, the trimmer is asked to return the memory to the system:
// the Go runtime keeps freed heap for a while, and an engine that was filled once would
// otherwise look, to the kernel and to the pod's limit, as large as at its peak.
func (b *Budget) give(client string, n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if c := b.clients[client] - n; c > 0 {
		b.clients[client] = c
	} else {
		delete(b.clients, client)
	}
	if b.peak >= trimFloor && b.used <= b.peak/4 {
		b.peak = b.used
		select {
		case b.trim <- struct{}{}:
		default: // a trim is already asked for
		}
	}
}

// trimPause bounds how often the trimmer runs a full collection.
const trimPause = 2 * time.Second

// Serve runs the trimmer until ctx ends: each time the sessions have given back most
// of their peak, it returns freed memory to the system (debug.FreeOSMemory), at most
// once per trimPause. It is a suture service; the engine's tree owns it.
func (b *Budget) Serve(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.trim:
		}
		debug.FreeOSMemory()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(trimPause):
		}
	}
}

// String names the trimmer in the supervision tree.
func (b *Budget) String() string { return "session budget" }

// ClientOf is the client a request came from, by its reply subject: nats.go answers
// every request of a connection on one inbox prefix (_INBOX.<id>.<token>), so the
// subject without its last token names the connection. A reply subject of fewer than
// three tokens is its own client.
func ClientOf(reply string) string {
	n := 0
	for i := range len(reply) {
		if reply[i] == '.' {
			n++
		}
	}
	if n < 2 {
		return reply
	}
	for i := len(reply) - 1; i >= 0; i-- {
		if reply[i] == '.' {
			return reply[:i]
		}
	}
	return reply
}

// Limits are the limits an engine gives each of its hosts from its configuration (the
// limits block): one Budget for all, and the same bounds on sessions. Zero values keep
// the defaults.
type Limits struct {
	Budget               *Budget
	MaxSessions          int
	MaxSessionsPerClient int
	MaxSessionBytes      int64
	// MaxRequestBytes bounds one overflow upload (OverflowConfig.MaxRequestBytes).
	MaxRequestBytes int64
	IdleTimeout     time.Duration
	MaxLifetime     time.Duration
}

// Apply sets l on cfg, leaving what l does not set.
func (l Limits) Apply(cfg *TransferConfig) {
	cfg.Budget = or(l.Budget, cfg.Budget)
	cfg.MaxSessions = or(l.MaxSessions, cfg.MaxSessions)
	cfg.MaxSessionsPerClient = or(l.MaxSessionsPerClient, cfg.MaxSessionsPerClient)
	cfg.MaxSessionBytes = or(l.MaxSessionBytes, cfg.MaxSessionBytes)
	cfg.IdleTimeout = or(l.IdleTimeout, cfg.IdleTimeout)
	cfg.MaxLifetime = or(l.MaxLifetime, cfg.MaxLifetime)
}
