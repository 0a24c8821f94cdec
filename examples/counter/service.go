// Package counter is an example of a service of an embedder's own, served by an
// embedded engine next to the kernel services: named counters that go up, with a typed
// client, a store in a JetStream bucket that refuses a stale engine's writes by the
// epoch, and a store in memory. The engine's examples and its chaos harness run
// against it (a service that is not keyvalue, with a workload and a checker of its
// own); docs/embedding.md walks through it.
//
// Operations, on abi.svc.counter.v1.<operation>:
//
//	incr {name, by}  -> {value}   adds by (at least 1) to the counter and returns the new value
//	get  {name}      -> {value}   the counter's value; a counter never incremented is 0
package counter

import (
	"context"
	"errors"
	"fmt"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
)

// Name is the service's wire name.
const Name = "counter"

// Operation names.
const (
	OpIncr = "incr"
	OpGet  = "get"
)

// MaxNameBytes bounds a counter's name.
const MaxNameBytes = 256

// Errors a Store returns; Service maps them to the protocol's codes.
var (
	// ErrInvalid is a request that cannot run: a bad name or increment.
	ErrInvalid = errors.New("counter: invalid request")
	// ErrStale is a write refused because another engine took over since this one
	// adopted its epoch: nothing ran, so the caller may resend it to the engine that
	// serves now.
	ErrStale = errors.New("counter: this engine's epoch is stale")
)

// IncrRequest is the body of incr.
type IncrRequest struct {
	protocol.Ctx
	Name string `json:"name"`
	By   int64  `json:"by"`
}

// GetRequest is the body of get.
type GetRequest struct {
	protocol.Ctx
	Name string `json:"name"`
}

// Reply is the reply of both operations.
type Reply struct {
	Value int64 `json:"value"`
}

// Store keeps the counters.
type Store interface {
	// Incr adds by to the counter name and returns its new value. epoch is the
	// engine's epoch for the call (engine.CallEpoch); a shared store refuses, with
	// ErrStale and having changed nothing, a write under an epoch older than one it
	// has seen.
	Incr(ctx context.Context, name string, by int64, epoch uint64) (int64, error)
	// Get returns the counter's value, 0 for one never incremented.
	Get(ctx context.Context, name string) (int64, error)
	// Data says where the counters live (engine.SharedData or engine.LocalData).
	Data() engine.Data
}

// Service is the counter service over store, for engine.WithService.
func Service(store Store) engine.Service {
	return engine.Service{
		Name:        Name,
		Description: "named counters that go up (an example of an embedder's service)",
		Data:        store.Data(),
		Operations: map[string]primaries.Operation{
			OpIncr: primaries.Handle(func(ctx context.Context, r *IncrRequest) (Reply, error) {
				if err := check(r.Name); err != nil {
					return Reply{}, err
				}
				if r.By < 1 {
					return Reply{}, fmt.Errorf("%w: by is %d; a counter goes up by at least 1", ErrInvalid, r.By)
				}
				epoch, _ := engine.CallEpoch(ctx)
				v, err := store.Incr(ctx, r.Name, r.By, epoch)
				return Reply{Value: v}, err
			}),
			OpGet: primaries.ReadOnly(primaries.Handle(func(ctx context.Context, r *GetRequest) (Reply, error) {
				if err := check(r.Name); err != nil {
					return Reply{}, err
				}
				v, err := store.Get(ctx, r.Name)
				return Reply{Value: v}, err
			})),
		},
		// The one place the service's errors meet the protocol's codes. (A stale write
		// is the store's protocol.Refused already: only it knows that nothing ran.)
		Errors: engine.ErrorCodes{{Target: ErrInvalid, Code: protocol.InvalidArgument}},
	}
}

func check(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalid)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: the name has %d bytes, more than %d", ErrInvalid, len(name), MaxNameBytes)
	}
	return nil
}

// Client is the typed client of the counter service, as client.KeyValue is of
// keyvalue. Errors are *client.CallError values wrapping a *protocol.Error.
type Client struct{ svc *client.Service }

// NewClient returns a counter client over t.
func NewClient(t *client.Transport) *Client { return &Client{svc: client.NewService(t, Name)} }

// Incr adds by to the counter name and returns its new value.
func (c *Client) Incr(ctx context.Context, name string, by int64) (int64, error) {
	r, err := client.Call[Reply](ctx, c.svc, OpIncr, IncrRequest{Name: name, By: by})
	return r.Value, err
}

// Get returns the value of the counter name.
func (c *Client) Get(ctx context.Context, name string) (int64, error) {
	r, err := client.Call[Reply](ctx, c.svc, OpGet, GetRequest{Name: name})
	return r.Value, err
}
