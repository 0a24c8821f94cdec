package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/clock"
	"github.com/abi-engine/engine/internal/notify"
	"github.com/abi-engine/engine/protocol"
)

// Defaults of TransferConfig.
// The engine's memory for sessions is bounded by the budget (one Budget for every host
// of an engine), each client's share of it, and each session's limit: no client can
// make the engine hold more than the budget, and one client that fills its share leaves
// the rest to the others.
const (
	DefaultMaxSessions          = 64
	DefaultMaxSessionsPerClient = 8
	DefaultMaxSessionBytes      = 64 << 20
	DefaultMaxBufferedBytes     = 256 << 20
	DefaultMaxClientBytes       = 64 << 20
	DefaultIdleTimeout          = 60 * time.Second
	DefaultMaxLifetime          = 15 * time.Minute
)

// maxReapInterval bounds how long an idle session outlives its timeout.
const maxReapInterval = time.Second

// stopFlushTimeout bounds the round trip Stop makes after its UNSUBs.
const stopFlushTimeout = time.Second

// ErrClosed is returned by Serve on a host that was closed (or whose actor stopped).
var ErrClosed = errors.New("transfer host closed")

// Handler runs a transfer operation when the client starts its session. It receives
// what the client uploaded (nil when it wrote nothing) and returns what the client then
// reads (nil for nothing). An upload such as object put stores req.Upload and returns
// nil; a download such as object get ignores req.Upload and returns the object.
//
// It runs on a goroutine the host owns, with ctx cancelled when the session closes or
// the host stops, and bounded by the start request's timeout_ms. It must return when
// ctx ends: Stop waits for it (Close only until its own context ends). A *protocol.Error it returns reaches the client as is;
// any other error is INTERNAL. A failed start ends the session.
type Handler func(ctx context.Context, req TransferRequest) ([]byte, error)

// TransferRequest is what a Handler works on.
type TransferRequest struct {
	SessionID string
	Operation string
	// Codec is the session's: the codec of its open. It says how Metadata is encoded
	// and which codes the client expects (the protobuf clients' OBJECT_NOT_FOUND where
	// JSON has NOT_FOUND).
	Codec protocol.Codec
	// Caller is who opened the session: its service token's `sub`, "" without one.
	Caller string
	// Metadata is the open request's metadata, as the client sent it: a JSON value in
	// a JSON session, the operation's own protobuf message in a protobuf one.
	Metadata json.RawMessage
	// Upload is every chunk written, in sequence order.
	Upload []byte
	// Reserve takes n bytes of the session's budget (its limit, its client's share,
	// the engine's) for what the handler is about to produce, before it reads it: a
	// download learns its size first and reserves it, so starts that would pass the
	// budget are refused having read nothing, instead of each reading its object and
	// being refused after (issue 26: N starts held N objects). The error, a
	// *protocol.Error (RESOURCE_EXHAUSTED, retryable, or PAYLOAD_TOO_LARGE), is the
	// handler's to return. The result then counts against what was reserved: a larger
	// one takes the difference, a smaller one gives the rest back. It may be called
	// more than once, one call at a time; ctx bounds the wait for the host's answer.
	Reserve func(ctx context.Context, n int64) error
}

// TransferConfig configures a TransferHost. Zero values take the defaults.
type TransferConfig struct {
	// Prefix is the subject prefix, e.g. protocol.TransferPrefix("object_storage").
	Prefix string
	// Owner is the engine's instance id; empty takes NewOwnerID().
	Owner string
	// Handlers maps each operation clients may open to what runs at its start. A host
	// without handlers does not subscribe to <prefix>.open.
	Handlers map[string]Handler
	// LeaseValid reports, with one atomic load, whether the engine's last successful
	// lease renewal was sent less than lease/2 ago, as primaries.Config.LeaseValid does
	// (docs/design.md §5.8). Every operation that reads or changes shared data (open, write,
	// start, read) runs only when it returns true; otherwise it is answered UNAVAILABLE,
	// retryable, having run nothing. A close always runs: it frees only this host's
	// memory. Required.
	LeaseValid func() bool
	// ChunkBytes is the largest chunk the host offers; 0 and anything above half the
	// broker's max payload (checked at every open, as a reconnect may change it) take
	// half the max payload. At least protocol.MinChunkBytes.
	ChunkBytes int
	// MaxSessions bounds the sessions open at once (RESOURCE_EXHAUSTED beyond).
	MaxSessions int
	// MaxSessionsPerClient bounds the sessions one client (ClientOf) has open at once
	// (RESOURCE_EXHAUSTED beyond), so abandoned opens of one client lock out no other.
	MaxSessionsPerClient int
	// MaxSessionBytes bounds what one session holds, uploaded or produced
	// (PAYLOAD_TOO_LARGE beyond).
	MaxSessionBytes int64
	// Budget bounds what the sessions of every host sharing it hold together, and per
	// client (RESOURCE_EXHAUSTED beyond). nil: a budget of this host's own, of
	// MaxBufferedBytes and MaxClientBytes.
	Budget *Budget
	// MaxBufferedBytes and MaxClientBytes size the host's own budget when Budget is nil.
	MaxBufferedBytes int64
	MaxClientBytes   int64
	// MaxCallsInFlight bounds the calls received and not yet answered, a start whose
	// handler runs included (RESOURCE_EXHAUSTED beyond); 0 is four per session.
	MaxCallsInFlight int
	// IdleTimeout closes a session no call has touched for that long.
	IdleTimeout time.Duration
	// MaxLifetime closes a session that long after it opened, however busy, so a chunk
	// now and then cannot keep one open for ever.
	MaxLifetime time.Duration
	// Clock is the time source of idle expiry; nil is the real clock.
	Clock clock.Clock
	// Logger receives crashes, failed handlers and failed replies; nil discards.
	Logger *zap.Logger
	// Tokens, optional, verifies the service token (Nats-Auth-Token) of every
	// exchange: with it an exchange of either codec without a valid token is refused
	// UNAUTHENTICATED having done nothing, and each session belongs to the `sub` of
	// its opener's token (PERMISSION_DENIED for any other). Without it JSON exchanges
	// need no token and protobuf ones are refused UNAUTHENTICATED (auth.go).
	Tokens TokenVerifier
	// OnNoTokens, optional, is told of every protobuf exchange refused because Tokens
	// is nil; the engine logs the first one.
	OnNoTokens func()
}

// TransferHost serves one transfer prefix (protocol/transfer.go has the wire protocol):
// a hollywood actor, one actor per session, and a sessions.Host for the handover.
//
// The TransferHost value is what its spawner owns and what outlives a crashed actor
// (docs/design.md §3): the subscriptions, the registry of open sessions, the byte budget and
// the counters. Only the host actor changes them, in its Receive; session actors ask it
// by message. Handles (Sessions, SessionPID, SessionsFinished) read what the host actor
// publishes. What lives only in a session actor is that session's bytes and sequence
// numbers: a crashed session actor loses its session, whose next call is NOT_FOUND.
//
// Its methods (Serve, StopAccepting, Stop, Close) send the host actor the role command
// and wait for its answer; the root sends the same commands as actors messages.
type TransferHost struct {
	nc       *nats.Conn
	cfg      TransferConfig
	owner    string
	prefix   string
	clock    clock.Clock
	log      *zap.Logger
	reapTick time.Duration

	life    context.Context // ends at Close: every step, handler and wait derives from it
	endLife context.CancelFunc

	ref       atomic.Pointer[hostRef] // the host actor, from its Initialized on
	actorDone context.Context         // ends when the host actor has stopped
	actorGone context.CancelFunc
	poisoned  atomic.Bool // Close poisons the host actor once

	// Durable state, changed only by the host actor.
	ownerSubs []*nats.Subscription // <prefix>.<owner>.<op>, one per op
	openSub   *nats.Subscription   // <prefix>.open, nil while not accepting
	openDrain *Drain               // the delivery of the ended <prefix>.open, until Stop or Serve
	epoch     context.Context      // from Serve to Stop; parent of every session's context
	endEpoch  context.CancelFunc
	sessions  map[string]*entry
	buffered  int64          // bytes this host's sessions hold together
	perClient map[string]int // open sessions per client

	// The hot path's own counter: calls received and not yet answered. Counted at the
	// edge (the callbacks), so the bound on calls in flight holds before anything queues.
	inflight atomic.Int64
	quiet    *notify.Value[uint64] // bumped each time inflight drops to 0

	view          *notify.Value[hostView] // published by the host actor, read by handles
	sessionActors *notify.Value[int]      // session actors spawned and not yet stopped

	steps *actors.Group // the broker steps, the drain waits, the final stop
	work  *actors.Group // the reaper and the handlers; shut from Stop to Serve

	opLimits map[string]int64 // what one session of these operations may hold, instead of MaxSessionBytes; set once at construction

	afterReap func(now time.Time) // tests: called by the host actor after each reap pass, with the time it judged
}

// hostRef is where the host actor is.
type hostRef struct {
	eng *actor.Engine
	pid *actor.PID
}

// hostView is what the host actor publishes for the handles: copy-on-write, never
// changed once published.
type hostView struct {
	serving  bool                  // takes new sessions: between Serve and Stop
	sessions map[string]*actor.PID // the open sessions' actors
	drain    *Drain                // the ended <prefix>.open still delivering, or nil
}

// NewTransferHost builds a host on nc. nc must be connected: the broker's max payload
// decides whether transfers fit at all. Spawn its actor (Spawn, or Producer and
// SpawnOptions under a parent), then Serve.
func NewTransferHost(nc *nats.Conn, cfg TransferConfig) (*TransferHost, error) {
	if nc == nil {
		return nil, errors.New("transfer host: nil NATS connection")
	}
	if err := validPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	cfg.Handlers = maps.Clone(cfg.Handlers) // the caller's map may change; ours may not
	if cfg.Owner == "" {
		cfg.Owner = NewOwnerID()
	} else if !ValidOwnerID(cfg.Owner) {
		return nil, fmt.Errorf("transfer host %s: owner id %q is not 32 lowercase hex characters", cfg.Prefix, cfg.Owner)
	}
	for op, h := range cfg.Handlers {
		if op == "" || strings.ContainsAny(op, ". *>\t\r\n") {
			return nil, fmt.Errorf("transfer host %s: operation %q is not a single subject token", cfg.Prefix, op)
		}
		if h == nil {
			return nil, fmt.Errorf("transfer host %s: operation %q has a nil handler", cfg.Prefix, op)
		}
	}
	if mp := nc.MaxPayload(); mp/2 < protocol.MinChunkBytes {
		return nil, fmt.Errorf("transfer host %s: the broker's max payload of %d bytes is too small for transfers: chunks of at least %d bytes need twice that",
			cfg.Prefix, mp, protocol.MinChunkBytes)
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = math.MaxInt
	} else if cfg.ChunkBytes < protocol.MinChunkBytes {
		return nil, fmt.Errorf("transfer host %s: chunk size %d is below the minimum of %d bytes", cfg.Prefix, cfg.ChunkBytes, protocol.MinChunkBytes)
	}
	if err := nonNegative(cfg.Prefix, "max sessions", int64(cfg.MaxSessions)); err != nil {
		return nil, err
	}
	if err := nonNegative(cfg.Prefix, "max session bytes", cfg.MaxSessionBytes); err != nil {
		return nil, err
	}
	if err := nonNegative(cfg.Prefix, "max buffered bytes", cfg.MaxBufferedBytes); err != nil {
		return nil, err
	}
	if err := nonNegative(cfg.Prefix, "max calls in flight", int64(cfg.MaxCallsInFlight)); err != nil {
		return nil, err
	}
	if err := nonNegative(cfg.Prefix, "max sessions per client", int64(cfg.MaxSessionsPerClient)); err != nil {
		return nil, err
	}
	if err := nonNegative(cfg.Prefix, "max client bytes", cfg.MaxClientBytes); err != nil {
		return nil, err
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("transfer host %s: idle timeout %s is negative", cfg.Prefix, cfg.IdleTimeout)
	}
	if cfg.MaxLifetime < 0 {
		return nil, fmt.Errorf("transfer host %s: max lifetime %s is negative", cfg.Prefix, cfg.MaxLifetime)
	}
	if cfg.LeaseValid == nil {
		return nil, fmt.Errorf("transfer host %s: LeaseValid is nil; every transfer operation checks the lease before it runs", cfg.Prefix)
	}
	cfg.MaxSessions = or(cfg.MaxSessions, DefaultMaxSessions)
	cfg.MaxCallsInFlight = or(cfg.MaxCallsInFlight, 4*cfg.MaxSessions)
	cfg.MaxSessionBytes = or(cfg.MaxSessionBytes, DefaultMaxSessionBytes)
	cfg.MaxSessionsPerClient = min(or(cfg.MaxSessionsPerClient, DefaultMaxSessionsPerClient), cfg.MaxSessions)
	if cfg.Budget == nil {
		cfg.MaxBufferedBytes = or(cfg.MaxBufferedBytes, DefaultMaxBufferedBytes)
		cfg.Budget = NewBudget(cfg.MaxBufferedBytes, or(cfg.MaxClientBytes, min(DefaultMaxClientBytes, cfg.MaxBufferedBytes)))
	}
	cfg.MaxBufferedBytes, cfg.MaxClientBytes = cfg.Budget.Total(), cfg.Budget.PerClient()
	cfg.IdleTimeout = or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.MaxLifetime = or(cfg.MaxLifetime, DefaultMaxLifetime)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	h := &TransferHost{
		nc:            nc,
		cfg:           cfg,
		owner:         cfg.Owner,
		prefix:        cfg.Prefix,
		clock:         cfg.Clock,
		log:           cfg.Logger.With(zap.String("prefix", cfg.Prefix), zap.String("owner", cfg.Owner)),
		reapTick:      max(time.Millisecond, min(maxReapInterval, cfg.IdleTimeout/2, cfg.MaxLifetime/2)),
		sessions:      map[string]*entry{},
		perClient:     map[string]int{},
		quiet:         notify.New[uint64](0),
		view:          notify.New(hostView{}),
		sessionActors: notify.New(0),
		steps:         actors.NewGroup(),
		work:          actors.NewGroup(),
	}
	h.work.Shut() // until Serve
	h.life, h.endLife = context.WithCancel(context.Background())
	h.actorDone, h.actorGone = context.WithCancel(context.Background())
	return h, nil
}

func validPrefix(p string) error {
	if p == "" || strings.ContainsAny(p, " *>\t\r\n") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return fmt.Errorf("transfer host: prefix %q is not a subject without wildcards", p)
	}
	return nil
}

func nonNegative(prefix, what string, v int64) error {
	if v < 0 {
		return fmt.Errorf("transfer host %s: %s %d is negative", prefix, what, v)
	}
	return nil
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Owner is the engine instance id the host's sessions belong to.
func (h *TransferHost) Owner() string { return h.owner }

// Prefix is the host's subject prefix.
func (h *TransferHost) Prefix() string { return h.prefix }

// PID is the host actor's PID, nil until it is spawned.
func (h *TransferHost) PID() *actor.PID {
	if r := h.ref.Load(); r != nil {
		return r.pid
	}
	return nil
}

// SessionPID is the PID of the actor of session id, nil if no such session is open.
// The chaos harness kills session actors through it.
func (h *TransferHost) SessionPID(id string) *actor.PID { return h.view.Load().sessions[id] }

// Sessions is the number of open sessions.
func (h *TransferHost) Sessions() int { return len(h.view.Load().sessions) }

// tell sends msg to the host actor, if it is spawned.
func (h *TransferHost) tell(msg any) {
	if r := h.ref.Load(); r != nil {
		r.eng.Send(r.pid, msg)
	}
}
