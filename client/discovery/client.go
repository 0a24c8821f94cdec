package discovery

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
	"github.com/abi-engine/engine/protocol"
)

// Error is a refusal the registry answered: its code (LEASE_EXPIRED, MODULE_NOT_FOUND,
// …) and message ("<CODE>: <text>" for the registry's own refusals).
type Error struct {
	Op      string
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("discovery %s: %s: %s", e.Op, e.Code, e.Message) }

// Is matches an *Error of the same code (a target with an empty Op and Message).
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrLeaseExpired   = &Error{Code: "LEASE_EXPIRED"}
	ErrModuleNotFound = &Error{Code: "MODULE_NOT_FOUND"}
	ErrUnavailable    = &Error{Code: "UNAVAILABLE"}
	ErrRegistryBusy   = &Error{Code: "REGISTRY_BUSY"}
)

var projectPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Token returns the service token of the next call (a fresh one when tokens expire).
type Token func() (string, error)

// StaticToken is a Token that is always tok.
func StaticToken(tok string) Token { return func() (string, error) { return tok, nil } }

// Client calls project's registry on nc.
type Client struct {
	nc      *nats.Conn
	project string
	token   Token
	timeout time.Duration
	observe Observer
}

// Observer sees every call of a Client once its outcome is known: the operation, its
// request, when it was sent and when its reply (or error) came, and its error. The
// chaos harness records the calls of its module sessions with it.
type Observer func(op string, req proto.Message, invoke, complete time.Time, err error)

// Observe makes o see every call of c from now on. Call it before c is used.
func (c *Client) Observe(o Observer) { c.observe = o }

// Resends on "no responders": the SDK's window and pauses.
const (
	resendWindow = 5 * time.Second
	firstPause   = 50 * time.Millisecond
	maxPause     = 500 * time.Millisecond
)

// New is the client of project's registry; token signs every call; timeout bounds
// each attempt (10 s when 0).
func New(nc *nats.Conn, project string, token Token, timeout time.Duration) (*Client, error) {
	switch {
	case nc == nil || token == nil:
		return nil, errors.New("discovery: a client needs a connection and a token")
	case !projectPattern.MatchString(project):
		return nil, fmt.Errorf("discovery: invalid project %q: 1 to 64 letters, digits, '_' or '-'", project)
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Client{nc: nc, project: project, token: token, timeout: timeout}, nil
}

// Project is the registry's project.
func (c *Client) Project() string { return c.project }

// call sends req to op and decodes the reply into resp; an error in the reply is an
// *Error.
func (c *Client) call(ctx context.Context, op string, req, resp proto.Message) error {
	if c.observe == nil {
		return c.send(ctx, op, req, resp)
	}
	invoke := time.Now()
	err := c.send(ctx, op, req, resp)
	c.observe(op, req, invoke, time.Now(), err)
	return err
}

// send is call without the observer.
func (c *Client) send(ctx context.Context, op string, req, resp proto.Message) error {
	tok, err := c.token()
	if err != nil {
		return fmt.Errorf("discovery %s: token: %w", op, err)
	}
	data, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("discovery %s: %w", op, err)
	}
	subject := "abi.discovery." + c.project + ".v1." + op
	resendUntil := time.Now().Add(resendWindow)
	pause := firstPause
	for {
		msg := nats.NewMsg(subject)
		msg.Data = data
		msg.Header.Set(protocol.HeaderAuthToken, tok)
		actx, cancel := context.WithTimeout(ctx, c.timeout)
		r, err := c.nc.RequestMsgWithContext(actx, msg)
		cancel()
		if errors.Is(err, nats.ErrNoResponders) && time.Now().Add(pause).Before(resendUntil) {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("discovery %s: %w", op, ctx.Err())
			case <-t.C:
			}
			pause = min(2*pause, maxPause)
			continue
		}
		if err != nil {
			return fmt.Errorf("discovery %s: %w", op, err)
		}
		if err := proto.Unmarshal(r.Data, resp); err != nil {
			return fmt.Errorf("discovery %s: a reply that is not a %s: %w", op, resp.ProtoReflect().Descriptor().Name(), err)
		}
		return replyError(op, resp)
	}
}

// replyError is the CallError in field 1 of every reply, as an *Error.
func replyError(op string, resp proto.Message) error {
	r := resp.ProtoReflect()
	fd := r.Descriptor().Fields().ByNumber(1)
	if fd == nil || fd.Kind() != protoreflect.MessageKind || !r.Has(fd) {
		return nil
	}
	e := r.Get(fd).Message()
	f := e.Descriptor().Fields()
	return &Error{Op: op, Code: e.Get(f.ByName("code")).String(), Message: e.Get(f.ByName("message")).String()}
}

// GetModule returns every live instance of module at major, whatever its status.
func (c *Client) GetModule(ctx context.Context, module string, major uint32) ([]*pb.Instance, error) {
	var r pb.GetModuleResponse
	if err := c.call(ctx, "get_module", &pb.GetModuleRequest{ModuleId: module, ContractMajor: major}, &r); err != nil {
		return nil, err
	}
	return r.Instances, nil
}

// ListModules returns every live instance, by instance id, reading every page.
func (c *Client) ListModules(ctx context.Context) ([]*pb.Instance, error) {
	var out []*pb.Instance
	after := ""
	for {
		var r pb.ListModulesResponse
		if err := c.call(ctx, "list_modules", &pb.ListModulesRequest{Limit: 100, AfterInstanceId: after}, &r); err != nil {
			return nil, err
		}
		out = append(out, r.Instances...)
		if after = r.NextAfterInstanceId; after == "" {
			return out, nil
		}
	}
}

// Evict removes an instance now; the token's caller must be an admin identity (api,
// engine).
func (c *Client) Evict(ctx context.Context, instanceID string) (*pb.Instance, error) {
	var r pb.EvictResponse
	if err := c.call(ctx, "evict", &pb.EvictRequest{InstanceId: instanceID}, &r); err != nil {
		return nil, err
	}
	return r.Instance, nil
}
