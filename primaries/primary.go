package primaries

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/notify"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
)

// MaxConcurrentLimit is the largest MaxConcurrent a Primary accepts (docs/design.md §4.4).
const MaxConcurrentLimit = 4096

// Config is what a Primary needs besides its Service.
type Config struct {
	// Conn is the service connection. The Primary never closes it.
	Conn *nats.Conn
	// InstanceID is the engine instance id, stamped on every reply (Abi-Engine-Instance).
	InstanceID string
	// MaxConcurrent is nats.max_concurrent_requests: how many calls of this service run
	// at once, 1..MaxConcurrentLimit. Further calls wait, counted as in flight.
	MaxConcurrent int
	// LeaseValid reports, with one atomic load, whether the engine's last successful
	// lease renewal was sent less than lease/2 ago (docs/design.md §5.8). A call runs only when
	// it returns true; otherwise it is answered UNAVAILABLE, retryable.
	LeaseValid func() bool
	// Overflow, optional, parks replies too large for one message (the engine's
	// sessions.OverflowHost). Without it such a reply is PAYLOAD_TOO_LARGE.
	Overflow Overflow
	// Uploads, optional, reads the request of a protobuf call that names an overflow
	// upload (protocol.HeaderOverflowRequest): the engine's sessions.OverflowHost.
	// Without it such a call is refused UNAVAILABLE.
	Uploads Uploads
	// Fence, optional, is the service's shared backend as it takes the epoch (the
	// JetStream and PostgreSQL backends; nil for local ones and for services without a
	// backend): the serve step adopts the epoch of actors.Serve in it before it
	// subscribes, and a Serve with another epoch while serving adopts that one. A
	// failed adoption (a store at a newer epoch: this engine is stale) is answered
	// actors.ServeFailed, and a primary that was not serving subscribes nothing.
	Fence EpochFence
	// OnCall, optional, is asked once per operation, when the Primary is made, for the
	// CallObserver of that operation (so a metrics update can hold its handles instead
	// of looking them up by label on every call).
	OnCall func(service, operation string) CallObserver
	// Failpoints, optional, hosts skip-lease-check and stall-before-write (package
	// failpoint).
	Failpoints *failpoint.Set
	// Tracer, optional, makes a span of every call (trace.go).
	Tracer CallTracer
	// Tokens, optional, verifies the service token (header Nats-Auth-Token) of every
	// call: with it a call of either codec without a valid token is refused
	// UNAUTHENTICATED before anything runs. Without it JSON calls need no token and
	// protobuf calls are refused UNAUTHENTICATED (auth.go).
	Tokens TokenVerifier
	// OnNoTokens, optional, is told of every protobuf call refused because Tokens is
	// nil; the engine logs the first one.
	OnNoTokens func()
}

// CallObserver is told of every call of one operation once its answer is on its way:
// the error code ("" when it succeeded) and the time from receipt. It runs on the
// calls' goroutines, so it must be quick and safe for concurrent use.
type CallObserver func(code protocol.Code, d time.Duration)

// EpochFence is a shared backend's side of the epoch (package internal/epoch):
// AdoptEpoch advances the store's epoch to epoch when it is older, uses it when it is
// the same, and fails, matching epoch.ErrFenced, when the store holds a newer one.
// From then on the backend's writes carry it.
type EpochFence interface {
	AdoptEpoch(ctx context.Context, epoch uint64) error
}

// Overflow parks a reply too large for one message for its caller to fetch, or answers
// what the caller should know instead; sessions.OverflowHost implements it. msg is the
// request (its reply subject and headers); held is what the call reserved ahead
// (Reserve, nil for nothing), which a parked reply takes over: the caller releases it
// once the reply has returned.
type Overflow interface {
	ReplyHeld(ctx context.Context, msg *nats.Msg, data []byte, header nats.Header, held *sessions.Reservation) error
	// ReplyProtobufHeld is ReplyHeld for a protobuf call: data is its response
	// message, and fail makes the response message carrying an error the caller gets
	// instead.
	ReplyProtobufHeld(ctx context.Context, msg *nats.Msg, data []byte, fail func(*protocol.Error) []byte, held *sessions.Reservation) error
	// Reserve takes hold bytes of the engine's memory budget for a call of client
	// whose reply of reply bytes will be parked (CallMemory.Reserve).
	Reserve(client string, hold, reply int64) (*sessions.Reservation, error)
}

var (
	// ErrClosed is why a Primary refuses to serve after Close.
	ErrClosed = errors.New("primaries: the primary is closed")
	// ErrNoActor is what the methods that drive the role (Serve, StopAccepting) return
	// when the primary's actor does not run: spawn it first (Spawn, or Producer).
	ErrNoActor = errors.New("primaries: the primary's actor does not run")
)

// Errors a run's context is cancelled with; the reply of a call they interrupt names them.
var (
	errStopped       = errors.New("the engine stopped serving")
	errDrainDeadline = errors.New("the drain deadline passed")
)

// Primary serves one kernel service as a NATS micro service. Create it with New and
// spawn its actor (Spawn, or Producer); it serves once the actor has been told
// actors.Serve (or Serve has been called). Its methods are safe for concurrent use.
//
// The Primary is the part that outlives an actor instance (docs/design.md §3): the runs with
// their micro services, calls in flight and cancel functions, and the role the actor
// plays (role.go). The actor changes them; the hot path (call.go) only counts its calls;
// the methods read the view the actor publishes and talk to the actor by message.
type Primary struct {
	svc          Service
	cfg          Config
	ops          []string                // sorted operation names
	sem          chan struct{}           // one token per running call, shared by every run
	backlog      chan queued             // calls waiting for a slot (backlog.go)
	okHeader     nats.Header             // read-only, shared by every success reply
	okHeaderSize int64                   // its encoded size, which counts against the max payload
	refusal      *nats.Msg               // read-only: the header and body exhausted answers with
	inline       bool                    // calls run on micro's callback (Service.Inline, no fail points)
	observers    map[string]CallObserver // by operation, from Config.OnCall; nil without it

	// role is the actor's: touched only in Receive, and by Close once no actor can run.
	role roleState
	// view is what the actor publishes for the methods: phase, runs, the live instance.
	view *notify.Value[view]
	// steps owns the step goroutines the actor started; Close waits for them.
	steps *actors.Group
	// base ends every step when Close gives up waiting (its ctx ended).
	base       context.Context
	cancelBase context.CancelCauseFunc
	closing    chan struct{} // held by the Close under way

	// The hot path's own.
	replies      replyQueue
	running      atomic.Int64 // calls executing their operation right now
	maxPayload   atomic.Int64 // the broker's max payload as last read from the connection
	backlogBytes atomic.Int64 // the bytes of the calls in the backlog
}

// view is a published snapshot of the primary, read by the methods (InFlight, the
// $SRV.STATS data, SessionsFinished, Close) without touching the actor's fields.
type view struct {
	phase  actors.RolePhase
	runs   []runView          // oldest first
	steps  []*actors.RoleStep // the steps whose report the actor has not handled
	closed bool               // Close has begun: no actor instance started later takes the role
	// stopAsked: Stop was called while no actor instance ran; the next one takes it.
	stopAsked bool

	// The actor instance that plays the role now, nil when none runs; pid and engine
	// are how to reach it.
	live   *primaryActor
	pid    *actor.PID
	engine *actor.Engine
}

// runView is a run as the view shows it.
type runView struct {
	run *run
	// draining: its subscriptions are being (or have been) drained, and SessionsFinished
	// waits until everything routed to them before the UNSUB has arrived.
	draining bool
	// stopping: a StopAccepting or Stop ends (or has ended) its subscriptions; ms is
	// its micro service, nil until added. Close reads them once no actor runs.
	stopping bool
	ms       micro.Service
}

var _ sessions.Host = (*Primary)(nil)

// New checks the configuration and builds a Primary that does not serve yet.
func New(svc Service, cfg Config) (*Primary, error) {
	switch {
	case cfg.Conn == nil:
		return nil, errors.New("primaries: Config.Conn is nil")
	case cfg.InstanceID == "":
		return nil, errors.New("primaries: Config.InstanceID is empty")
	case cfg.MaxConcurrent < 1 || cfg.MaxConcurrent > MaxConcurrentLimit:
		return nil, fmt.Errorf("primaries: Config.MaxConcurrent is %d, want 1..%d", cfg.MaxConcurrent, MaxConcurrentLimit)
	case cfg.LeaseValid == nil:
		return nil, errors.New("primaries: Config.LeaseValid is nil")
	case svc.Name == "":
		return nil, errors.New("primaries: Service.Name is empty")
	case len(svc.Operations) == 0:
		return nil, fmt.Errorf("primaries: service %q has no operations", svc.Name)
	}
	for name, op := range svc.Operations {
		if op == nil {
			return nil, fmt.Errorf("primaries: service %q: operation %q is nil", svc.Name, name)
		}
	}
	for name, op := range svc.Protobuf {
		switch {
		case svc.Operations[name] == nil:
			return nil, fmt.Errorf("primaries: service %q: protobuf operation %q has no JSON operation", svc.Name, name)
		case op.Run == nil || op.Fail == nil:
			return nil, fmt.Errorf("primaries: service %q: protobuf operation %q lacks Run or Fail", svc.Name, name)
		}
	}
	svc.Operations = maps.Clone(svc.Operations)
	svc.Protobuf = maps.Clone(svc.Protobuf)
	var observers map[string]CallObserver
	if cfg.OnCall != nil {
		observers = make(map[string]CallObserver, len(svc.Operations))
		for name := range svc.Operations {
			observers[name] = cfg.OnCall(svc.Name, name)
		}
	}
	base, cancel := context.WithCancelCause(context.Background())
	p := &Primary{
		svc:      svc,
		cfg:      cfg,
		ops:      slices.Sorted(maps.Keys(svc.Operations)),
		sem:      make(chan struct{}, cfg.MaxConcurrent),
		backlog:  make(chan queued, backlogSize(cfg.MaxConcurrent)),
		okHeader: nats.Header{protocol.HeaderInstance: []string{cfg.InstanceID}},
		// "NATS/1.0\r\n" + "<key>: <value>\r\n" + "\r\n", as nats.go encodes it.
		okHeaderSize: int64(len("NATS/1.0\r\n") + len(protocol.HeaderInstance) + 2 + len(cfg.InstanceID) + 2 + 2),
		// A stall fail point must not hold up micro's callback: with fail points the
		// calls go to workers.
		inline:     svc.Inline && cfg.Failpoints == nil,
		observers:  observers,
		role:       roleState{phase: actors.RoleIdle},
		view:       notify.New(view{phase: actors.RoleIdle}),
		steps:      actors.NewGroup(),
		base:       base,
		cancelBase: cancel,
		closing:    make(chan struct{}, 1),
	}
	p.refusal = exhaustedReply(p)
	return p, nil
}

// Name is the service's wire name.
func (p *Primary) Name() string { return p.svc.Name }

// InFlight is the number of calls received and not yet answered.
func (p *Primary) InFlight() int {
	var n int64
	for _, rv := range p.view.Load().runs {
		n += rv.run.calls.load()
	}
	return int(n)
}

// stats is the "data" of every endpoint in $SRV.STATS: micro's own processing time and
// error counts see only the hand-off to a worker, so the primary reports its own.
func (p *Primary) stats() any {
	return map[string]any{"in_flight": p.InFlight(), "max_concurrent_requests": p.cfg.MaxConcurrent}
}

// Serve has the actor subscribe (as actors.Serve does) and returns once the broker has
// confirmed the subscriptions (a flush round trip), or ctx's error. Serving while
// already serving does nothing; serving after Stop starts a new run.
func (p *Primary) Serve(ctx context.Context) error {
	return p.ask(ctx, actors.Serve{})
}

// StopAccepting has the actor end the endpoint subscriptions at the broker and returns
// once the broker has confirmed the UNSUB: micro's Stop drains the subscriptions (queues
// the UNSUB and keeps delivering what was routed before it), then a flush round trip
// proves the broker processed it. ctx bounds that confirmation. Calls already received
// go on, with no deadline (SessionsFinished waits for them, Stop cuts them short). Not
// serving: nothing to do.
func (p *Primary) StopAccepting(ctx context.Context) error {
	return p.ask(ctx, actors.StopAccepting{})
}

// SessionsFinished returns nil once every call received has been answered, or ctx's
// error. After StopAccepting or Stop this includes the calls that were still in the
// connection's pending buffer when the broker confirmed the UNSUB.
func (p *Primary) SessionsFinished(ctx context.Context) error {
	for _, rv := range p.view.Load().runs {
		if err := rv.run.finished(ctx, rv.draining); err != nil {
			return err
		}
	}
	return nil
}

// Stop cancels every running call and has the actor end the subscriptions (as
// actors.Stop does). The subscriptions are drained, not dropped: every call the broker
// routed here before the UNSUB is still handed to the callback, which refuses it, like
// a call waiting for a slot: UNAVAILABLE, retryable, as it did not run. So a paused
// engine that resumes answers everything it finds queued, and its callers resend at
// once instead of waiting for their timeout. Stop returns once the actor has taken the
// command; SessionsFinished (and Close) wait until those calls are answered, which takes
// a broker round trip. Safe to call more than once.
//
// With no actor running, Stop cancels the runs' calls and leaves word in the view; the
// actor started next takes the Stop (or Close ends the subscriptions).
func (p *Primary) Stop() {
	for {
		v := p.view.Load()
		if v.live != nil {
			if err := p.askLive(context.Background(), v, actors.Stop{}); !errors.Is(err, ErrNoActor) {
				return
			}
			continue // the actor went away before it took the command; ask the next or do without
		}
		// Under the view's lock, so that an actor starting now either was live before
		// (and is asked) or finds the word (and takes the Stop in its Receive).
		asked := false
		var runs []runView
		p.view.Update(func(v view) (view, bool) {
			if v.live != nil {
				return v, false
			}
			asked, v.stopAsked = true, true
			runs = v.runs
			return v, true
		})
		if asked {
			// The calls stop now: a run's context is its calls' signal, not the role's.
			// Only the runs of the view that took the word: an instance may start as
			// soon as it is left, take the Stop and serve a Serve that follows, whose
			// run the view read again would show.
			for _, rv := range runs {
				rv.run.cancel(errStopped)
			}
			return
		}
	}
}

// ask hands a role command to the live actor and waits for its answer, ctx or the end
// of that actor instance.
func (p *Primary) ask(ctx context.Context, msg any) error {
	v := p.view.Load()
	switch {
	case v.live == nil && v.closed:
		return fmt.Errorf("primaries: %q: %w", p.svc.Name, ErrClosed)
	case v.live == nil:
		return fmt.Errorf("primaries: %q: %w", p.svc.Name, ErrNoActor)
	}
	return p.askLive(ctx, v, msg)
}

// askLive hands msg to the instance v shows live (actors.AskRole); its end before it
// answered is ErrNoActor.
func (p *Primary) askLive(ctx context.Context, v view, msg any) error {
	tell := func(ask actors.RoleAsk) { v.engine.Send(v.pid, ask) }
	err := actors.AskRole(ctx, tell, msg, v.live.gone)
	if errors.Is(err, actors.ErrMemberGone) {
		return fmt.Errorf("primaries: %q: the actor stopped before it answered: %w", p.svc.Name, ErrNoActor)
	}
	return err
}
