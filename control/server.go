package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/abi-engine/engine/internal/group"
	"github.com/abi-engine/engine/lease"
	"github.com/nats-io/nats.go"
)

// RollCallWindow is how long a step-down listens for standbys answering the roll call:
// each answers at once, so this only has to cover a round trip on a loaded machine.
const RollCallWindow = 500 * time.Millisecond

// requestBound bounds the work of one step-down request (the roll call, then handing
// the target to the ownership); the handover itself runs after the reply.
const requestBound = 10 * time.Second

// Engine is what the control subjects ask of the engine that serves them.
type Engine interface {
	// AsStandby is this engine as it answers the roll call; false while it does not
	// stand by.
	AsStandby() (Standby, bool)
	// Serving reports whether this engine serves now.
	Serving() bool
	// HandOver directs the next release to t and begins the handover (the same
	// cascade as SIGTERM), then returns; stay keeps the process as a standby after it.
	// An error matching ErrNotServing is a race lost (another step-down, an eviction):
	// it is answered NOT_SERVING.
	HandOver(ctx context.Context, t lease.Target, stay bool) error
}

// Server answers the control subjects of one engine instance.
type Server struct {
	nc       *nats.Conn
	instance string
	eng      Engine
	subs     []*nats.Subscription

	// requests are the step-down requests being handled; Stop shuts it and waits.
	requests *group.Group
	stop     context.CancelFunc
	ctx      context.Context
}

// Serve subscribes the control subjects of instance on nc.
func Serve(nc *nats.Conn, instance string, eng Engine) (*Server, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{nc: nc, instance: instance, eng: eng, ctx: ctx, stop: cancel, requests: group.New()}
	for subj, h := range map[string]nats.MsgHandler{
		StandbysSubject:           s.rollCall,
		StepDownSubject(instance): s.stepDown,
	} {
		sub, err := nc.Subscribe(subj, h)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("control: subscribe %s: %w", subj, err)
		}
		s.subs = append(s.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("control: subscribe: %w", err)
	}
	return s, nil
}

// Stop unsubscribes and waits for the requests being handled.
func (s *Server) Stop() {
	s.requests.Shut()
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	s.stop()
	_ = s.requests.Wait(context.Background()) // each request is bounded by requestBound, and cancelled
}

func (s *Server) rollCall(m *nats.Msg) {
	sb, ok := s.eng.AsStandby()
	if !ok || m.Reply == "" {
		return
	}
	b, _ := json.Marshal(sb)
	_ = m.Respond(b)
}

// stepDown handles one request on a goroutine of the Server's: the roll call waits.
func (s *Server) stepDown(m *nats.Msg) {
	s.requests.Go(func() { // refused once Stop has begun: the request goes unanswered
		ctx, cancel := context.WithTimeout(s.ctx, requestBound)
		defer cancel()
		reply := s.handle(ctx, m.Data)
		b, _ := json.Marshal(reply)
		_ = m.Respond(b)
	})
}

func (s *Server) handle(ctx context.Context, data []byte) StepDownReply {
	var req StepDownRequest
	if len(data) > 0 {
		if err := json.Unmarshal(data, &req); err != nil {
			return StepDownReply{Error: &Error{Code: CodeInvalid, Message: "the step-down request is not a JSON object {to?, stay?}: " + err.Error()}}
		}
	}
	if !s.eng.Serving() {
		return StepDownReply{Error: &Error{Code: CodeNotServing, Message: "engine " + s.instance + " does not serve now (fenced, handing over or standing by): nothing was changed"}}
	}
	standbys, err := Standbys(ctx, s.nc, RollCallWindow)
	if err != nil {
		return StepDownReply{Error: &Error{Code: "UNAVAILABLE", Message: "the roll call of standbys failed: " + err.Error()}}
	}
	chosen, ok := Choose(standbys, req.To, s.instance)
	if !ok {
		return StepDownReply{Error: noStandby(req.To, len(standbys))}
	}
	switch err := s.eng.HandOver(ctx, TargetFor(chosen, req.To), req.Stay); {
	case errors.Is(err, ErrNotServing):
		// A race lost to another step-down or an eviction: say what happened, so nobody
		// "fixes" it by evicting the engine that now holds the lease.
		return StepDownReply{Error: &Error{Code: CodeNotServing, Message: "engine " + s.instance + " no longer serves: " +
			strings.TrimPrefix(err.Error(), ErrNotServing.Error()+": ") + "; this request changed nothing (abi-engine status shows the holder now)"}}
	case err != nil:
		return StepDownReply{Error: &Error{Code: "INTERNAL", Message: "could not begin the handover: " + err.Error()}}
	}
	return StepDownReply{Successor: &chosen}
}

// Standbys calls the roll call and gathers the answers that arrive within window.
func Standbys(ctx context.Context, nc *nats.Conn, window time.Duration) ([]Standby, error) {
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	var out []Standby
	err := rollCall(ctx, nc, func(sb Standby) bool {
		out = append(out, sb)
		return true
	})
	return out, err
}

// AnyStandby calls the roll call and reports whether any engine answers it before ctx
// ends: true at the first answer, false once ctx has ended without one.
func AnyStandby(ctx context.Context, nc *nats.Conn) (bool, error) {
	found := false
	err := rollCall(ctx, nc, func(Standby) bool {
		found = true
		return false
	})
	return found, err
}

// rollCall asks the roll call and hands each standby's answer to each, until each
// returns false or ctx ends (which is no error: the roll call has no end of its own).
func rollCall(ctx context.Context, nc *nats.Conn, each func(Standby) bool) error {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe() //nolint:errcheck // best effort: the inbox is ours alone
	if err := nc.PublishRequest(StandbysSubject, inbox, nil); err != nil {
		return err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			return nil
		case err != nil:
			return err
		}
		var sb Standby
		if len(m.Data) == 0 || json.Unmarshal(m.Data, &sb) != nil || sb.InstanceID == "" {
			continue // a no-responders status, or a foreign answer
		}
		if !each(sb) {
			return nil
		}
	}
}

// RequestStepDown asks engine instance to step down and returns its answer: the
// successor, or a refusal (an *Error matching ErrNoStandby or ErrNotServing).
func RequestStepDown(ctx context.Context, nc *nats.Conn, instance string, req StepDownRequest) (Standby, error) {
	body, _ := json.Marshal(req)
	m, err := nc.RequestWithContext(ctx, StepDownSubject(instance), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return Standby{}, fmt.Errorf("engine %s answers no step-down request on %s (not running, or an engine without step-down)", instance, StepDownSubject(instance))
	}
	if err != nil {
		return Standby{}, fmt.Errorf("step-down request to %s: %w", instance, err)
	}
	var rep StepDownReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return Standby{}, fmt.Errorf("step-down answer from %s is not JSON: %w", instance, err)
	}
	if rep.Error != nil {
		return Standby{}, rep.Error
	}
	if rep.Successor == nil {
		return Standby{}, fmt.Errorf("step-down answer from %s names no successor", instance)
	}
	return *rep.Successor, nil
}
