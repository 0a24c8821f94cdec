package discovery

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/abi-engine/engine/actors"
	commonv1 "github.com/abi-engine/engine/proto/abi/common/v1"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
	"github.com/abi-engine/engine/protocol"
)

// The eight operations, each on its own subject: no wildcard, so the presence subjects
// (abi.discovery.<project>.v1.presence.<instance>, which only a module answers) never
// reach the engine.
const (
	OpAuthorizeAgent = "authorize_agent"
	OpAuthorizeModel = "authorize_model"
	OpRegister       = "register"
	OpRenew          = "renew"
	OpUnregister     = "unregister"
	OpEvict          = "evict"
	OpGetModule      = "get_module"
	OpListModules    = "list_modules"
)

// Operations lists them in the order the member subscribes them.
var Operations = []string{OpAuthorizeAgent, OpAuthorizeModel, OpRegister, OpRenew, OpUnregister, OpEvict, OpGetModule, OpListModules}

// Subject is the subject of project's operation.
func Subject(project, op string) string { return "abi.discovery." + project + ".v1." + op }

// Queue is the queue group every engine serving project's registry joins.
func Queue(project string) string { return "abi.discovery." + project + ".owners" }

// The transport's refusals, without a code prefix, as the Python service sends them.
const (
	textUnauthenticated = "Missing or invalid service token"
	textMalformed       = "Malformed protobuf"
	textRequestTooLarge = "Discovery request exceeds limit"
	textReplyTooLarge   = "Discovery response exceeds limit"
	textFailed          = "Registry operation failed"
)

// maxRequestBytes bounds a request and a reply besides the broker's max payload.
const maxRequestBytes = 512 * 1024

// TokenVerifier checks a service token and returns its caller (the JWT's `sub`);
// servicetoken.Verifier is one. It must be safe for concurrent use.
type TokenVerifier interface {
	Verify(token string) (caller string, err error)
}

// MemberConfig is what a Member needs.
type MemberConfig struct {
	// Conn is the engine's service connection.
	Conn    *nats.Conn
	Project string
	Service *Service
	// Tokens verifies the service token of every call; nil refuses every call
	// UNAUTHENTICATED (an engine without nats.jwt_secret_file cannot tell callers apart).
	Tokens TokenVerifier
	// MaxConcurrent bounds the calls running at once, over the eight subjects; the
	// others wait in the subscriptions' pending buffers.
	MaxConcurrent int
	Logger        *zap.Logger
	// OnCall, optional, observes every answered call.
	OnCall func(op, code string, d time.Duration)
}

// Member serves a Service on NATS for a serving engine; its actor (actor.go) obeys the
// role messages. The hot path (handle) never goes through the actor.
type Member struct {
	cfg   MemberConfig
	log   *zap.Logger
	slots chan struct{}

	// calls counts the calls received and not yet answered, from their delivery.
	mu    sync.Mutex
	calls int
	idle  chan struct{} // closed while calls is 0
	// steps owns the actor's role steps (actors.StartStep); Close waits for them.
	steps *actors.Group

	// Touched only by the actor (its Receive and the steps it waits for), and by Close
	// once the actor is gone.
	subs []*nats.Subscription
	// subscribing is the Serve's subscribe step whose report the actor has not handled:
	// poisoned first, the actor never will, and Close ends what the step subscribed.
	subscribing *actors.RoleStep
}

// NewMember makes the member; it subscribes nothing until its actor is told Serve.
func NewMember(cfg MemberConfig) (*Member, error) {
	switch {
	case cfg.Conn == nil || cfg.Service == nil:
		return nil, errors.New("discovery: a member needs a connection and a service")
	case !validProject(cfg.Project):
		return nil, fmt.Errorf("discovery: invalid project %q: 1 to 64 letters, digits, '_' or '-'", cfg.Project)
	case cfg.MaxConcurrent < 1:
		return nil, fmt.Errorf("discovery: MaxConcurrent %d, want at least 1", cfg.MaxConcurrent)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	idle := make(chan struct{})
	close(idle)
	return &Member{cfg: cfg, log: cfg.Logger.With(zap.String("discovery", cfg.Project)),
		slots: make(chan struct{}, cfg.MaxConcurrent), idle: idle, steps: actors.NewGroup()}, nil
}

// projectPattern is the Python engine's rule: the project is one subject token and part
// of a bucket name.
var projectPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func validProject(p string) bool { return projectPattern.MatchString(p) }

// Project is the registry's project.
func (m *Member) Project() string { return m.cfg.Project }

// Service is the registry the member serves.
func (m *Member) Service() *Service { return m.cfg.Service }

// InFlight is how many calls were received and not yet answered.
func (m *Member) InFlight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

func (m *Member) callStarted() {
	m.mu.Lock()
	if m.calls == 0 {
		m.idle = make(chan struct{})
	}
	m.calls++
	m.mu.Unlock()
}

func (m *Member) callEnded() {
	m.mu.Lock()
	if m.calls--; m.calls == 0 {
		close(m.idle)
	}
	m.mu.Unlock()
}

// callsAnswered returns once no call is in flight, or with ctx's error.
func (m *Member) callsAnswered(ctx context.Context) error {
	m.mu.Lock()
	idle := m.idle
	m.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("discovery: %d calls still unanswered: %w", m.InFlight(), ctx.Err())
	}
}

// deliver is the subscriptions' callback: the call is counted at once, waits for a slot
// (holding back this subscription's later messages in its pending buffer, as the Python
// service does), and runs on its own goroutine, which the count lets the stop wait for.
func (m *Member) deliver(op string) nats.MsgHandler {
	return func(msg *nats.Msg) {
		m.callStarted()
		m.slots <- struct{}{}
		go func() {
			defer m.callEnded()
			defer func() { <-m.slots }()
			m.handle(op, msg)
		}()
	}
}

// maxPayload is the bound of requests and replies: the broker's, and 512 KiB.
func (m *Member) maxPayload() int {
	if mp := m.cfg.Conn.MaxPayload(); mp > 0 && mp < maxRequestBytes {
		return int(mp)
	}
	return maxRequestBytes
}

// callTimeout bounds the registry work of one call.
const callTimeout = 15 * time.Second

// handle answers one call, in the Python service's order: the caller's token, the size,
// the body, the caller token of the authorize operations, then the operation.
func (m *Member) handle(op string, msg *nats.Msg) {
	start := time.Now()
	out, code := m.answer(op, msg)
	if msg.Reply != "" {
		if err := m.cfg.Conn.Publish(msg.Reply, out); err != nil {
			m.log.Warn("a discovery reply was not sent", zap.String("operation", op), zap.Error(err))
		}
	}
	if m.cfg.OnCall != nil {
		m.cfg.OnCall(op, code, time.Since(start))
	}
}

func (m *Member) answer(op string, msg *nats.Msg) ([]byte, string) {
	empty := emptyReply(op)
	fail := func(code, text string) ([]byte, string) {
		setError(empty, &commonv1.CallError{Code: code, Message: text})
		b, _ := proto.Marshal(empty)
		return b, code
	}
	owner := ""
	if m.cfg.Tokens != nil {
		var err error
		owner, err = m.cfg.Tokens.Verify(msg.Header.Get(protocol.HeaderAuthToken))
		if err != nil {
			owner = ""
		}
	}
	if owner == "" {
		return fail("UNAUTHENTICATED", textUnauthenticated)
	}
	if len(msg.Data) > m.maxPayload() || msg.Header.Get(protocol.HeaderOverflowRequest) != "" {
		return fail("PAYLOAD_TOO_LARGE", textRequestTooLarge)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	resp, err := m.run(ctx, op, msg.Data, owner)
	var e *Error
	switch {
	case errors.Is(err, errMalformed):
		return fail("INVALID_ARGUMENT", textMalformed)
	case errors.Is(err, errUnauthenticated):
		return fail("UNAUTHENTICATED", textUnauthenticated)
	case errors.As(err, &e):
		return fail(e.Code, e.Error())
	case err != nil:
		m.log.Warn("a discovery call failed", zap.String("operation", op), zap.Error(err))
		return fail("UNAVAILABLE", textFailed)
	}
	b, err := proto.Marshal(resp)
	if err != nil || len(b) > m.maxPayload() {
		return fail("PAYLOAD_TOO_LARGE", textReplyTooLarge)
	}
	return b, "OK"
}

var (
	errMalformed       = errors.New("malformed protobuf")
	errUnauthenticated = errors.New("missing or invalid caller token")
)

// run decodes the request of op and runs it for owner.
func (m *Member) run(ctx context.Context, op string, data []byte, owner string) (proto.Message, error) {
	s := m.cfg.Service
	decode := func(req proto.Message) error {
		if err := proto.Unmarshal(data, req); err != nil {
			return errMalformed
		}
		return nil
	}
	caller := func(token string) (string, error) {
		if m.cfg.Tokens == nil {
			return "", errUnauthenticated
		}
		c, err := m.cfg.Tokens.Verify(token)
		if err != nil || c == "" {
			return "", errUnauthenticated
		}
		return c, nil
	}
	switch op {
	case OpRegister:
		req := &pb.RegisterRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return s.Register(ctx, req, owner)
	case OpRenew:
		req := &pb.RenewRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return s.Renew(ctx, req, owner)
	case OpUnregister:
		req := &pb.UnregisterRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return s.Unregister(ctx, req, owner)
	case OpEvict:
		req := &pb.EvictRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return s.Evict(ctx, req, owner)
	case OpGetModule:
		req := &pb.GetModuleRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return s.GetModule(ctx, req)
	case OpListModules:
		req := &pb.ListModulesRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		return s.ListModules(ctx, req)
	case OpAuthorizeAgent:
		req := &pb.AuthorizeAgentRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		who, err := caller(req.GetCallerToken())
		if err != nil {
			return nil, err
		}
		if err := s.AuthorizeAgent(ctx, req, owner); err != nil {
			return nil, err
		}
		return &pb.AuthorizeAgentResponse{CallerIdentity: who, CallerAdmin: s.IsAdmin(who)}, nil
	case OpAuthorizeModel:
		req := &pb.AuthorizeModelRequest{}
		if err := decode(req); err != nil {
			return nil, err
		}
		who, err := caller(req.GetCallerToken())
		if err != nil {
			return nil, err
		}
		if err := s.AuthorizeModel(ctx, req, owner); err != nil {
			return nil, err
		}
		return &pb.AuthorizeModelResponse{CallerIdentity: who, CallerAdmin: s.IsAdmin(who)}, nil
	}
	return nil, fmt.Errorf("discovery: no operation %q", op)
}

// emptyReply is the response message of op, empty.
func emptyReply(op string) proto.Message {
	switch op {
	case OpRegister:
		return &pb.RegisterResponse{}
	case OpRenew:
		return &pb.RenewResponse{}
	case OpUnregister:
		return &pb.UnregisterResponse{}
	case OpEvict:
		return &pb.EvictResponse{}
	case OpGetModule:
		return &pb.GetModuleResponse{}
	case OpListModules:
		return &pb.ListModulesResponse{}
	case OpAuthorizeAgent:
		return &pb.AuthorizeAgentResponse{}
	case OpAuthorizeModel:
		return &pb.AuthorizeModelResponse{}
	}
	return &pb.UnregisterResponse{}
}

// setError sets field 1, the CallError every response carries.
func setError(msg proto.Message, e *commonv1.CallError) {
	r := msg.ProtoReflect()
	fd := r.Descriptor().Fields().ByNumber(1)
	r.Set(fd, protoreflect.ValueOfMessage(e.ProtoReflect()))
}
