package client

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/abi-engine/engine/protocol"
)

// Service is the client of an embedder's own service (engine.Service), on which a
// typed client like KeyValue is a few lines: its calls go to
// abi.svc.<name>.v1.<operation> with the same retry, error decoding and parked replies
// as the kernel's, and its transfers to protocol.TransferPrefix(name). Errors are
// *CallError values wrapping a *protocol.Error, as KeyValue's are.
type Service struct {
	t    *Transport
	name string
}

// NewService returns the client of the service called name over t.
func NewService(t *Transport, name string) *Service { return &Service{t: t, name: name} }

// Name is the service's wire name.
func (s *Service) Name() string { return s.name }

// Call sends req, encoded as JSON, to the operation op and decodes the reply into out
// (nil ignores the body). A req that embeds protocol.Ctx, as every request of a
// primaries.Handle operation does, gets the request's context member (the time left
// until ctx's deadline, so the engine stops working on a call nobody waits for) unless
// it carries one.
func (s *Service) Call(ctx context.Context, op string, req, out any) error {
	return s.t.call(ctx, s.name, op, func(_ []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.EncodeRequest(withContext(req, protocol.CtxOf(&rc).Context))
	}, out)
}

// Request sends req like Call and returns the reply as it came (its body and the
// instance that answered), for a caller that records who answered, as the chaos
// harness's workloads do.
func (s *Service) Request(ctx context.Context, op string, req any) (*Reply, error) {
	ctx, cancel := s.t.bound(ctx)
	defer cancel()
	subject := protocol.ServiceSubject(s.name, op)
	body, err := json.Marshal(withContext(req, requestContext(ctx)))
	if err != nil {
		s.t.counters.calls.Add(1)
		return nil, s.t.failed(&CallError{Subject: subject, Err: protocol.Errorf(protocol.InvalidArgument, "encode request: %v", err), Cause: err})
	}
	return s.t.Request(ctx, subject, body, overflowHeader())
}

// Call is Service.Call with the reply's type as a type parameter:
// client.Call[counterReply](ctx, svc, "incr", req).
func Call[Rep any](ctx context.Context, s *Service, op string, req any) (Rep, error) {
	var rep Rep
	err := s.Call(ctx, op, req, &rep)
	return rep, err
}

// Upload runs the service's transfer operation op with data as the upload (see
// Transport.Upload) and returns what it produced.
func (s *Service) Upload(ctx context.Context, op string, metadata any, data []byte) ([]byte, error) {
	return s.t.Upload(ctx, protocol.TransferPrefix(s.name), op, metadata, data)
}

// Download runs the service's transfer operation op without an upload (see
// Transport.Download) and returns what it produced, of any size up to the
// Transport's transfer limit.
func (s *Service) Download(ctx context.Context, op string, metadata any) ([]byte, error) {
	return s.t.Download(ctx, protocol.TransferPrefix(s.name), op, metadata)
}

var ctxType = reflect.TypeFor[protocol.Ctx]()

// withContext is req with its embedded protocol.Ctx set to rc when it has none; req
// itself is never changed. Anything else is returned as it is.
func withContext(req any, rc *protocol.RequestContext) any {
	if rc == nil || req == nil {
		return req
	}
	if _, raw := req.(json.RawMessage); raw {
		return req
	}
	v := reflect.ValueOf(req)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return req
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return req
	}
	f, ok := v.Type().FieldByName("Ctx")
	if !ok || !f.Anonymous || f.Type != ctxType || len(f.Index) != 1 {
		return req
	}
	if v.Field(f.Index[0]).Interface().(protocol.Ctx).Context != nil {
		return req
	}
	cp := reflect.New(v.Type()).Elem()
	cp.Set(v)
	cp.Field(f.Index[0]).Set(reflect.ValueOf(protocol.Ctx{Context: rc}))
	return cp.Interface()
}
