package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/report"
	discoveryclient "github.com/abi-engine/engine/client/discovery"
	"github.com/abi-engine/engine/internal/servicetoken"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
	"github.com/abi-engine/engine/protocol"
)

// The module traffic of the discovery scenario: module instances registered through the
// Go module client (client/discovery Session), each renewing on its own cadence, and
// readers calling get_module (and now and then list_modules) in a loop. Every register,
// renew and read is recorded for the checks (check.RegistryKept).

const (
	// discoveryProject is the registry the run's engines host.
	discoveryProject = "chaos"
	// moduleInstances instances of moduleCount modules are registered.
	moduleInstances = 12
	moduleCount     = 4
	// moduleReaders read the registry in a loop, one read every lease/20 each.
	moduleReaders = 2
	// discoveryLeases is the modules' membership lease in engine leases: long enough
	// that a SIGKILL's takeover (2 leases and a process start) and a renewal timed out
	// on the way leave every instance registered.
	discoveryLeases = 10
	// moduleCaller is the identity of the module traffic's tokens.
	moduleCaller = "abi-engine-chaos"
)

// discoveryLease is the modules' membership lease (nats.discovery.lease_seconds).
func (h *harness) discoveryLease() time.Duration {
	return min(discoveryLeases*h.lease, 300*time.Second)
}

// moduleTraffic is the module traffic of a run: its owner is the harness, whose
// teardown stops it.
type moduleTraffic struct {
	h         *harness
	client    *discoveryclient.Client
	instances map[string]string // instance id → module, fixed once started
	sessions  []*discoveryclient.Session

	mu    sync.Mutex
	calls []check.ModuleCall
	ops   []bench.Op // the same calls, for the failure checks

	stop    chan struct{}
	readers sync.WaitGroup
	closed  bool
}

// startModules registers the module instances, reports them initialized, and starts the
// readers.
func (h *harness) startModules() error {
	if len(h.secret) == 0 {
		return errors.New("chaos: the module traffic needs the run's service token secret")
	}
	secret := h.secret
	token := func() (string, error) { return servicetoken.Mint(secret, moduleCaller, time.Now(), time.Hour) }
	cl, err := discoveryclient.New(h.nc, discoveryProject, token, max(2*time.Second, 2*h.lease))
	if err != nil {
		return err
	}
	mt := &moduleTraffic{h: h, client: cl, instances: map[string]string{}, stop: make(chan struct{})}
	cl.Observe(mt.observed)
	h.mu.Lock()
	h.modules = mt
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	for i := range moduleInstances {
		module := fmt.Sprintf("chaos.module%d", i%moduleCount)
		desc := &pb.ModuleDescriptor{ModuleId: module, ContractMajor: 1, PackageVersion: "1.0"}
		s, err := discoveryclient.NewSession(cl, desc, fmt.Sprintf("chaos-%d-%02d", h.opts.Seed, i), "", nil)
		if err != nil {
			return err
		}
		mt.instances[s.InstanceID()] = module
		if err := s.Start(ctx); err != nil {
			return fmt.Errorf("register module instance %s: %w", s.InstanceID(), err)
		}
		mt.sessions = append(mt.sessions, s)
		if err := s.SetInitialized(ctx); err != nil {
			return fmt.Errorf("initialize module instance %s: %w", s.InstanceID(), err)
		}
	}
	for i := range moduleReaders {
		rng := rand.New(rand.NewPCG(uint64(h.opts.Seed), uint64(1000+i)))
		mt.readers.Go(func() { mt.read(i, rng) })
	}
	h.event(report.KindStep, "modules", "%d instances of %d modules registered (lease %s), renewing every lease/4; %d readers calling get_module",
		moduleInstances, moduleCount, h.discoveryLease(), moduleReaders)
	return nil
}

// observed records a register, renew or unregister of a session.
func (mt *moduleTraffic) observed(op string, req proto.Message, invoke, complete time.Time, err error) {
	var id string
	switch r := req.(type) {
	case *pb.RegisterRequest:
		id = r.GetInstanceId()
	case *pb.RenewRequest:
		id = r.GetInstanceId()
	case *pb.UnregisterRequest:
		id = r.GetInstanceId()
	default:
		return // the readers record their own calls
	}
	mt.record(check.ModuleCall{Op: op, Instance: id, Invoke: invoke, Complete: complete}, err, id)
}

// record keeps a call and its outcome.
func (mt *moduleTraffic) record(c check.ModuleCall, err error, key string) {
	op := bench.Op{Kind: "discovery " + c.Op, Key: key, Invoke: c.Invoke, Complete: c.Complete}
	if err != nil {
		c.Err, op.Err = err.Error(), err.Error()
		op.Code, op.Indefinite = moduleCode(err)
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	mt.calls = append(mt.calls, c)
	mt.ops = append(mt.ops, op)
}

// moduleCode is the code of a discovery call's failure, and whether it may have taken
// effect.
func moduleCode(err error) (protocol.Code, bool) {
	var e *discoveryclient.Error
	switch {
	case errors.As(err, &e):
		return protocol.Code(e.Code), e.Code == "INTERNAL"
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.Canceled):
		return protocol.Unavailable, false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return protocol.DeadlineExceeded, true
	default:
		return protocol.Internal, true
	}
}

// read is one reader: get_module of a module drawn at random, every eighth read
// list_modules, until the traffic stops.
func (mt *moduleTraffic) read(worker int, rng *rand.Rand) {
	pause := mt.h.lease / 20
	for n := 0; ; n++ {
		select {
		case <-mt.stop:
			return
		default:
		}
		if n%8 == 7 {
			mt.list(context.WithoutCancel(mt.h.ctx))
		} else {
			module := fmt.Sprintf("chaos.module%d", rng.IntN(moduleCount))
			c := check.ModuleCall{Op: "get_module", Module: module, Invoke: time.Now()}
			insts, err := mt.client.GetModule(context.WithoutCancel(mt.h.ctx), module, 1)
			c.Complete = time.Now()
			for _, in := range insts {
				c.Seen = append(c.Seen, in.GetInstanceId())
			}
			mt.record(c, err, fmt.Sprintf("%s (reader %d)", module, worker))
		}
		t := time.NewTimer(pause)
		select {
		case <-mt.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// list reads every instance, records the read and returns what it saw.
func (mt *moduleTraffic) list(ctx context.Context) ([]string, error) {
	c := check.ModuleCall{Op: "list_modules", Invoke: time.Now()}
	insts, err := mt.client.ListModules(ctx)
	c.Complete = time.Now()
	for _, in := range insts {
		c.Seen = append(c.Seen, in.GetInstanceId())
	}
	mt.record(c, err, "all")
	return c.Seen, err
}

// answeredSince reports whether a read invoked at or after t succeeded.
func (mt *moduleTraffic) answeredSince(t time.Time) bool {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	for i := len(mt.calls) - 1; i >= 0; i-- {
		c := mt.calls[i]
		if !c.Invoke.Before(t) && c.Err == "" && (c.Op == "get_module" || c.Op == "list_modules") {
			return true
		}
	}
	return false
}

// history is every module call so far, and the same as operations.
func (mt *moduleTraffic) history() ([]check.ModuleCall, []bench.Op) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return append([]check.ModuleCall(nil), mt.calls...), append([]bench.Op(nil), mt.ops...)
}

// stopReaders ends the readers and waits for them.
func (mt *moduleTraffic) stopReaders() {
	select {
	case <-mt.stop:
	default:
		close(mt.stop)
	}
	mt.readers.Wait()
}

// close stops the readers and unregisters every instance (Session.Close), once; it
// returns the sessions whose renewals had ended with an error, and the unregister
// errors.
func (mt *moduleTraffic) close() (ended []string, err error) {
	mt.stopReaders()
	mt.mu.Lock()
	if mt.closed {
		mt.mu.Unlock()
		return nil, nil
	}
	mt.closed = true
	mt.mu.Unlock()
	// At once: with no engine serving, each unregister waits out the client's resends.
	errs := make([]error, len(mt.sessions))
	var wg sync.WaitGroup
	for i, s := range mt.sessions {
		if e := s.Err(); e != nil {
			ended = append(ended, e.Error())
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(mt.h.ctx), 10*time.Second)
			defer cancel()
			errs[i] = s.Close(ctx)
		})
	}
	wg.Wait()
	return ended, errors.Join(errs...)
}
