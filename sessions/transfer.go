package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// Defaults of TransferConfig.
const (
	DefaultMaxSessions      = 32
	DefaultMaxSessionBytes  = 256 << 20
	DefaultMaxBufferedBytes = 1 << 30
	DefaultIdleTimeout      = 60 * time.Second
)

// maxReapInterval bounds how long an idle session outlives its timeout.
const maxReapInterval = time.Second

// stopFlushTimeout bounds the round trip Stop makes after its UNSUBs.
const stopFlushTimeout = time.Second

// ErrClosed is returned by Serve on a host that was closed.
var ErrClosed = errors.New("transfer host closed")

// Handler runs a transfer operation when the client starts its session. It receives
// what the client uploaded (nil when it wrote nothing) and returns what the client then
// reads (nil for nothing). An upload such as object put stores req.Upload and returns
// nil; a download such as object get ignores req.Upload and returns the object.
//
// It runs on a goroutine the host owns, with ctx cancelled when the session closes or
// the host stops, and bounded by the start request's timeout_ms. It must return when
// ctx ends: Stop waits for it. A *protocol.Error it returns reaches the client as is;
// any other error is INTERNAL. A failed start ends the session.
type Handler func(ctx context.Context, req TransferRequest) ([]byte, error)

// TransferRequest is what a Handler works on.
type TransferRequest struct {
	SessionID string
	Operation string
	// Metadata is the open request's metadata, as the client sent it.
	Metadata json.RawMessage
	// Upload is every chunk written, in sequence order.
	Upload []byte
}

// TransferConfig configures a TransferHost. Zero values take the defaults.
type TransferConfig struct {
	// Prefix is the subject prefix, e.g. protocol.TransferPrefix("object_storage").
	Prefix string
	// Owner is the engine's instance id; empty takes NewOwnerID().
	Owner string
	// Handlers maps each operation clients may open to what runs at its start. A host
	// without handlers (the overflow host) does not subscribe to <prefix>.open.
	Handlers map[string]Handler
	// LeaseValid reports, with one atomic load, whether the engine's last successful
	// lease renewal was sent less than lease/2 ago, as primaries.Config.LeaseValid does
	// (design §5.8). Every operation that reads or changes shared data (open, write,
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
	// MaxSessionBytes bounds what one session holds, uploaded or produced
	// (PAYLOAD_TOO_LARGE beyond).
	MaxSessionBytes int64
	// MaxBufferedBytes bounds what all sessions hold together (RESOURCE_EXHAUSTED
	// beyond).
	MaxBufferedBytes int64
	// MaxCallsInFlight bounds the calls received and not yet answered, a start whose
	// handler runs included (RESOURCE_EXHAUSTED beyond); 0 is four per session.
	MaxCallsInFlight int
	// IdleTimeout closes a session no call has touched for that long.
	IdleTimeout time.Duration
	// Clock is the time source of idle expiry; nil is SystemClock().
	Clock Clock
	// Logger receives crashes, failed handlers and failed replies; nil discards.
	Logger *slog.Logger
}

// TransferHost serves one transfer prefix (protocol/transfer.go has the wire protocol):
// a hollywood actor, one child actor per session, and a sessions.Host for the handover.
//
// The TransferHost value is the durable state its spawner owns: the subscriptions, the
// registry of open sessions, the byte budget and the counters. The actors close over
// it, so a crashed actor is replaced by a fresh one that carries on (see Producer).
// What lives only in a session actor is that session's bytes and sequence numbers: a
// crashed session actor loses its session, whose next call is NOT_FOUND.
//
// NATS callbacks decode each request and forward it with engine.Send: an open to the
// host actor, which spawns the session's actor; a write, start, read or close straight
// to the session's actor through the registry. Actors never block: the handlers run on
// goroutines the host owns, and role commands (actors.Serve, StopAccepting, Stop) run on
// goroutines that answer the sender when done.
type TransferHost struct {
	nc       *nats.Conn
	cfg      TransferConfig
	owner    string
	prefix   string
	clock    Clock
	log      *slog.Logger
	reapTick time.Duration

	life    context.Context // ends at Close
	endLife context.CancelFunc

	// roleMu serialises the role operations: Serve, StopAccepting, Stop, Close.
	roleMu    sync.Mutex
	openSub   *nats.Subscription
	ownerSubs []*nats.Subscription
	tickStop  chan struct{}

	mu        sync.Mutex
	engine    *actor.Engine
	pid       *actor.PID
	serving   bool
	closing   bool
	epoch     context.Context // from Serve to Stop; parent of every session's context
	endEpoch  context.CancelFunc
	sessions  map[string]*entry
	buffered  int64
	inflight  int
	openDrain *Drain
	idle      chan struct{} // closed (and replaced) whenever nothing is open or in flight

	liveActors int           // session actors spawned and not yet stopped
	actorsGone chan struct{} // closed (and replaced) whenever liveActors drops to 0

	work  sync.WaitGroup // the reaper's ticker goroutine and the handlers
	roles sync.WaitGroup // goroutines answering role commands

	restarts  atomic.Int64
	afterReap func() // tests: called by the host actor after each reap pass
}

// entry is one open session in the registry. Guarded by TransferHost.mu.
type entry struct {
	id       string
	op       string
	meta     json.RawMessage
	chunk    int
	pid      *actor.PID
	lastUsed time.Time
	pending  int  // calls routed to it and not yet answered
	running  bool // its handler runs
	closed   bool
	bytes    int64 // reserved from the host's budget
	ctx      context.Context
	cancel   context.CancelFunc
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
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("transfer host %s: idle timeout %s is negative", cfg.Prefix, cfg.IdleTimeout)
	}
	if cfg.LeaseValid == nil {
		return nil, fmt.Errorf("transfer host %s: LeaseValid is nil; every transfer operation checks the lease before it runs", cfg.Prefix)
	}
	cfg.MaxSessions = or(cfg.MaxSessions, DefaultMaxSessions)
	cfg.MaxCallsInFlight = or(cfg.MaxCallsInFlight, 4*cfg.MaxSessions)
	cfg.MaxSessionBytes = or(cfg.MaxSessionBytes, DefaultMaxSessionBytes)
	cfg.MaxBufferedBytes = or(cfg.MaxBufferedBytes, DefaultMaxBufferedBytes)
	cfg.IdleTimeout = or(cfg.IdleTimeout, DefaultIdleTimeout)
	if cfg.Clock == nil {
		cfg.Clock = SystemClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &TransferHost{
		nc:         nc,
		cfg:        cfg,
		owner:      cfg.Owner,
		prefix:     cfg.Prefix,
		clock:      cfg.Clock,
		log:        cfg.Logger.With("prefix", cfg.Prefix, "owner", cfg.Owner),
		reapTick:   max(time.Millisecond, min(maxReapInterval, cfg.IdleTimeout/2)),
		sessions:   map[string]*entry{},
		idle:       make(chan struct{}),
		actorsGone: make(chan struct{}),
	}
	h.life, h.endLife = context.WithCancel(context.Background())
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
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pid
}

// SessionPID is the PID of the actor of session id, nil if no such session is open.
// The chaos harness kills session actors through it.
func (h *TransferHost) SessionPID(id string) *actor.PID {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.sessions[id]; e != nil {
		return e.pid
	}
	return nil
}

// Restarts counts the crashes of the host's actors (host and sessions) that the
// recover middleware has replaced with a fresh instance.
func (h *TransferHost) Restarts() int64 { return h.restarts.Load() }

// Sessions is the number of open sessions.
func (h *TransferHost) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// Serve subscribes the owner-scoped subjects and, if the host serves operations,
// <prefix>.open on queue group <prefix>.owners, and returns once the broker has
// confirmed them. Serving again after StopAccepting or Stop subscribes what is missing.
func (h *TransferHost) Serve(ctx context.Context) error {
	h.roleMu.Lock()
	defer h.roleMu.Unlock()
	h.mu.Lock()
	switch {
	case h.closing:
		h.mu.Unlock()
		return fmt.Errorf("transfer host %s: %w", h.prefix, ErrClosed)
	case h.engine == nil:
		h.mu.Unlock()
		return fmt.Errorf("transfer host %s: its actor is not spawned; spawn it before Serve", h.prefix)
	}
	if !h.serving {
		h.serving = true
		h.epoch, h.endEpoch = context.WithCancel(h.life)
		h.startReaper()
	}
	h.mu.Unlock()

	if h.ownerSubs == nil {
		var subs []*nats.Subscription
		for _, op := range []string{protocol.TransferWrite, protocol.TransferStart, protocol.TransferRead, protocol.TransferClose} {
			sub, err := h.nc.Subscribe(OwnerSubject(h.prefix, h.owner, op), func(m *nats.Msg) { h.route(op, m) })
			if err != nil {
				for _, s := range subs {
					_ = s.Unsubscribe()
				}
				return fmt.Errorf("transfer host %s: subscribe %s: %w", h.prefix, OwnerSubject(h.prefix, h.owner, op), err)
			}
			subs = append(subs, sub)
		}
		h.ownerSubs = subs
	}
	if h.openSub == nil && len(h.cfg.Handlers) > 0 {
		sub, err := h.nc.QueueSubscribe(OpenSubject(h.prefix), OwnersQueue(h.prefix), h.routeOpen)
		if err != nil {
			return fmt.Errorf("transfer host %s: subscribe %s: %w", h.prefix, OpenSubject(h.prefix), err)
		}
		h.openSub = sub
		h.mu.Lock()
		h.openDrain = nil
		h.mu.Unlock()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, confirmTimeout)
		defer cancel()
	}
	if err := h.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("transfer host %s: the broker did not confirm its subscriptions: %w", h.prefix, err)
	}
	return nil
}

// startReaper starts the goroutine that asks the host actor to close idle sessions.
// Called with mu held, from Serve (which holds roleMu).
func (h *TransferHost) startReaper() {
	stop := make(chan struct{})
	h.tickStop = stop
	t := h.clock.NewTicker(h.reapTick)
	eng, pid := h.engine, h.pid
	h.work.Go(func() {
		defer t.Stop()
		for {
			select {
			case <-t.C():
				eng.Send(pid, reapTick{})
			case <-stop:
				return
			}
		}
	})
}

// StopAccepting ends the <prefix>.open subscription at the broker (StopDelivery) and
// returns once the broker confirmed it: new opens go to another engine. The opens
// already received are still answered, and open sessions go on. Calling it again
// confirms again.
func (h *TransferHost) StopAccepting(ctx context.Context) error {
	h.roleMu.Lock()
	var err error
	if sub := h.openSub; sub != nil {
		h.openSub = nil
		var d *Drain
		d, err = beginDrain(ctx, h.nc, []*nats.Subscription{sub})
		h.mu.Lock()
		h.openDrain = d
		h.mu.Unlock()
	}
	h.mu.Lock()
	d := h.openDrain
	h.mu.Unlock()
	h.roleMu.Unlock()
	if d == nil {
		return nil
	}
	if cerr := d.confirm(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("transfer host %s: stop accepting: %w", h.prefix, err)
	}
	return nil
}

// SessionsFinished returns nil once every open received before StopAccepting has been
// answered, no session is open (a session stays open until its client closes it or it
// idle-expires) and no call is in flight; or ctx's error.
func (h *TransferHost) SessionsFinished(ctx context.Context) error {
	h.mu.Lock()
	d := h.openDrain
	h.mu.Unlock()
	if d != nil {
		if err := d.Wait(ctx); err != nil {
			return fmt.Errorf("transfer host %s: %w", h.prefix, err)
		}
	}
	for {
		h.mu.Lock()
		n, k, ch := len(h.sessions), h.inflight, h.idle
		h.mu.Unlock()
		if n == 0 && k == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("transfer host %s: %d sessions open, %d calls in flight: %w", h.prefix, n, k, ctx.Err())
		}
	}
}

// Stop ends everything at once: every subscription, every open session (its actor is
// stopped and its handler cancelled; its callers then get NOT_FOUND, or no responders
// once the UNSUB has reached the broker). It returns once the handlers have returned.
// Safe to call more than once; Serve may follow it (fencing, then a renewal that
// succeeded).
func (h *TransferHost) Stop() {
	h.roleMu.Lock()
	defer h.roleMu.Unlock()
	subs := h.ownerSubs
	if h.openSub != nil {
		subs = append(subs, h.openSub)
	}
	h.ownerSubs, h.openSub = nil, nil
	h.mu.Lock()
	if d := h.openDrain; d != nil {
		subs = append(subs, d.subs...)
	}
	h.mu.Unlock()
	for _, s := range subs {
		// Unsubscribe, not Drain: what is pending is dropped on purpose.
		if err := s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			h.log.Warn("unsubscribe failed", "subject", s.Subject, "error", err)
		}
	}
	if len(subs) > 0 && !h.nc.IsClosed() {
		// One short round trip, so callers get "no responders" from now on rather than
		// a timeout. Not worth waiting long for, nor a warning when it fails (at an exit
		// after the broker went away, at fencing): the subscriptions are gone here
		// anyway, and the broker drops them with the connection.
		if err := h.nc.FlushTimeout(stopFlushTimeout); err != nil {
			h.log.Info("the broker did not confirm the UNSUBs of a stopped transfer host", "error", err)
		}
	}
	h.mu.Lock()
	h.serving = false
	for _, e := range h.sessions {
		h.closeLocked(e, "the host stopped", true)
	}
	if h.endEpoch != nil {
		h.endEpoch()
	}
	stop := h.tickStop
	h.tickStop = nil
	h.mu.Unlock()
	if stop != nil {
		close(stop)
	}
	h.work.Wait()
}

// Close stops the host for good: Stop (which stops every session actor), then it waits
// for the session actors to be gone, stops the host actor and waits for the goroutines
// answering role commands.
func (h *TransferHost) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closing = true // before Stop, so no role goroutine serves again behind it
	eng, pid := h.engine, h.pid
	h.mu.Unlock()
	h.Stop()
	h.endLife()
	var errs []error
	if err := h.sessionActorsStopped(ctx); err != nil {
		errs = append(errs, err)
	}
	if eng != nil {
		<-eng.PoisonCtx(ctx, pid).Done()
		if ctx.Err() != nil {
			errs = append(errs, fmt.Errorf("transfer host %s: its actor did not stop: %w", h.prefix, ctx.Err()))
		}
	}
	h.roles.Wait()
	return errors.Join(errs...)
}

// sessionActorsStopped waits until every session actor has run its Stopped.
func (h *TransferHost) sessionActorsStopped(ctx context.Context) error {
	for {
		h.mu.Lock()
		n, ch := h.liveActors, h.actorsGone
		h.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("transfer host %s: %d session actors did not stop: %w", h.prefix, n, ctx.Err())
		}
	}
}

// sessionActorGone is the last thing a session actor does.
func (h *TransferHost) sessionActorGone(e *entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closeLocked(e, "its actor stopped", false)
	h.liveActors--
	if h.liveActors == 0 {
		close(h.actorsGone)
		h.actorsGone = make(chan struct{})
	}
}

// goRole runs f on a goroutine Close waits for; false once the host is closing.
func (h *TransferHost) goRole(f func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.roles.Go(f)
	return true
}

// attach records the engine and PID of the host actor when it is spawned.
func (h *TransferHost) attach(e *actor.Engine, pid *actor.PID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pid != nil && !h.pid.Equals(pid) {
		h.log.Error("transfer host spawned twice; the second actor is ignored", "first", h.pid.String(), "second", pid.String())
		return
	}
	h.engine, h.pid = e, pid
}
