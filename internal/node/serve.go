package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/control"
	"github.com/abi-engine/engine/discovery"
	"github.com/abi-engine/engine/internal/backendhealth"
	"github.com/abi-engine/engine/internal/backends"
	"github.com/abi-engine/engine/internal/enginemetrics"
	"github.com/abi-engine/engine/internal/servicetree"
	"github.com/abi-engine/engine/internal/storeproof"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/sessions"
	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// servingSet is what a serving (or standby) engine serves: the backends, one primary
// per service, the session hosts, the jobs host, and their actors.
type servingSet struct {
	log         *zap.Logger
	conn        *nats.Conn // the service connection every member uses
	askOn       *nats.Conn // the lease's connection: the successor check asks on it
	kv          keyvalue.Store
	objects     objectstorage.Store
	primaries   []*primaries.Primary
	primaryPIDs []*actor.PID          // the primaries' actors, in the same order
	hosts       []sessions.Host       // every Host: primaries, transfer hosts, the overflow host
	members     []*actor.PID          // their actors
	named       map[string]*actor.PID // the same, by InjectPanic target name
	jobs        *actors.JobsHost
	jobsPID     *actor.PID
	discovery   *discovery.Member // nil when nats.discovery is off
	discoPID    *actor.PID
	transfers   []*sessions.TransferHost
	health      []*backendhealth.Health        // one per backend
	closers     []func() error                 // backends, in the order they were opened
	ids         map[string]storeproof.Identity // how each kernel service's backend names its store
}

// openSessions counts the transfer and overflow sessions open now.
func (s *servingSet) openSessions() int {
	n := 0
	for _, h := range s.transfers {
		n += h.Sessions()
	}
	return n
}

// stores are what the serving set's members are made on: the backends, each under its
// health and traced, with the fence a shared one adopts the epoch in; and the module
// registry's bucket when nats.discovery is set.
type stores struct {
	kv       keyvalue.Store
	objects  objectstorage.Store
	kvFence  primaries.EpochFence // nil: a local backend, which has no epoch
	objFence primaries.EpochFence
	registry *discovery.JetStreamStore // nil when nats.discovery is off
}

// openStores opens the stores of set on its connection: the backends, which a standby
// proves are the holder's (proveStores) before it opens anything more, then the
// registry's bucket. The tree holds the backends from the start (set.close): a set
// that fails half built leaves nothing open behind.
func (e *Engine) openStores(ctx context.Context, set *servingSet, cl claimed) (stores, error) {
	var st stores
	nc := set.conn
	e.tree.Add(svcBackends, servicetree.OnStop{Name: svcBackends, Stop: set.close})
	kv, closeKV, err := backends.KeyValue(ctx, e.cfg, nc, e.opts.Failpoints, e.log)
	if err != nil {
		return st, err
	}
	kvHealth := e.watchBackend(set, protocol.KeyValue, string(e.cfg.Services.KeyValue.Adapter), backendhealth.KeyValueProbe(kv), closeKV)
	// A shared backend takes the epoch (docs/architecture.md "Epoch"); its primary
	// adopts it before it serves. Local backends have none.
	kvFence, _ := kv.(primaries.EpochFence)
	set.ids = storeproof.Identities(e.cfg, kv)
	st.kvFence = storeproof.WithProof(kvFence, protocol.KeyValue, e.InstanceID(), set.ids[protocol.KeyValue], cl.store, e.log)
	st.kv = e.tracedKeyValue(backendhealth.KeyValue{Store: kv, H: kvHealth})
	objects, closeObjects, err := backends.ObjectStorage(ctx, e.cfg, nc, e.opts.Failpoints, e.log)
	if err != nil {
		return st, err
	}
	objHealth := e.watchBackend(set, protocol.ObjectStorage, string(e.cfg.Services.ObjectStorage.Adapter), backendhealth.ObjectStorageProbe(objects), closeObjects)
	// The transfer host writes through the same store, so the object_storage
	// primary's adoption covers its writes too.
	objFence, _ := objects.(primaries.EpochFence)
	st.objFence = storeproof.WithProof(objFence, protocol.ObjectStorage, e.InstanceID(), set.ids[protocol.ObjectStorage], cl.store, e.log)
	st.objects = e.tracedObjectStorage(backendhealth.ObjectStorage{Store: objects, H: objHealth})
	if cl.state == lease.StateStandby {
		// Before anything is built on them: a refused standby never serves.
		if err := e.proveStores(ctx, set, cl.store); err != nil {
			return st, err
		}
	}
	if d := e.cfg.NATS.Discovery; d != nil {
		st.registry, err = discovery.OpenJetStream(ctx, nc, d.Project, e.cfg.NATS.Engine.LeaseReplicas)
		if err != nil {
			return st, fmt.Errorf("engine: nats.discovery: %w", err)
		}
	}
	return st, nil
}

// buildMembers builds everything the engine serves on st, spawned as actors that serve
// nothing until the root tells them to; a member that fails leaves those spawned before
// it in set, which the teardown stops.
func (e *Engine) buildMembers(set *servingSet, st stores) error {
	nc := set.conn
	set.kv, set.objects = st.kv, st.objects
	own := e.ownership
	// The transfer hosts check the lease before every operation, as the primaries do
	// before every call (docs/design.md §5.8).
	limits := e.sessionLimits()
	tokens, noTokens, err := e.serviceTokens()
	if err != nil {
		return err
	}
	// The discovery member first, as the Python engine starts discovery before the
	// kernel services: the root tells the members in their order.
	if err := e.buildDiscovery(set, st.registry, tokens); err != nil {
		return err
	}
	// An embedder's service adopts the epoch like a kernel one: in its own Fence, if it
	// has one, and for CallEpoch; its transfers read the same epoch.
	epochs := make([]*servedEpoch, len(e.opts.Services))
	for i, svc := range e.opts.Services {
		epochs[i] = &servedEpoch{fence: svc.Fence}
	}
	// The session hosts are made before the primaries, which hand the overflow host
	// what outgrows a call; like every member they serve nothing until the root tells
	// them. They check the token of every exchange as the primaries check every call's,
	// and bind each session to its caller.
	auth := sessions.Auth{OnNoTokens: noTokens}
	if tokens != nil {
		auth.Tokens = tokens
	}
	overflow, err := sessions.NewOverflowHost(nc, sessions.OverflowConfig{
		Owner: e.InstanceID(), LeaseValid: own.Gate().Valid, Logger: e.log, Limits: limits,
		Tokens: auth.Tokens, OnNoTokens: auth.OnNoTokens,
	})
	if err != nil {
		return fmt.Errorf("engine: overflow host: %w", err)
	}
	transfers, err := objectstorage.NewTransferHost(nc, st.objects, e.InstanceID(), own.Gate().Valid, e.log, limits, auth)
	if err != nil {
		return fmt.Errorf("engine: object storage transfers: %w", err)
	}
	hosts := []*sessions.TransferHost{transfers, overflow.TransferHost}
	names := []string{"transfer:" + protocol.ObjectStorage, "overflow"}
	for i, svc := range e.opts.Services {
		if svc.Transfers == nil {
			continue
		}
		// A transfer host of the service's own, on its own prefix, checking the lease
		// before every operation like the kernel's.
		h, err := sessions.NewTransferHost(nc, sessions.TransferConfig{
			Prefix:     protocol.TransferPrefix(svc.Name),
			Owner:      e.InstanceID(),
			Handlers:   svc.Transfers(epochs[i].epoch.Load),
			LeaseValid: own.Gate().Valid,
			Logger:     e.log,
			Tokens:     auth.Tokens,
			OnNoTokens: auth.OnNoTokens,
		})
		if err != nil {
			return fmt.Errorf("engine: service %s: transfers: %w", svc.Name, err)
		}
		hosts = append(hosts, h)
		names = append(names, "transfer:"+svc.Name)
	}
	kvService, objService := keyvalue.Service(st.kv), objectstorage.Service(st.objects)
	// Memory backends never wait for I/O: their calls run on micro's callback.
	kvService.Inline = e.cfg.Services.KeyValue.Adapter == config.KeyValueMemory
	objService.Inline = e.cfg.Services.ObjectStorage.Adapter == config.ObjectStorageMemory
	services := []primaries.Service{kvService, objService}
	fences := []primaries.EpochFence{st.kvFence, st.objFence}
	for i, svc := range e.opts.Services {
		services = append(services, svc.Primary(epochs[i].epoch.Load))
		fences = append(fences, epochs[i])
	}
	// The members are spawned in the order the root tells them: the primaries, then
	// the hosts.
	for i, svc := range services {
		p, err := primaries.New(svc, primaries.Config{
			Conn:          nc,
			InstanceID:    e.InstanceID(),
			MaxConcurrent: e.cfg.NATS.MaxConcurrentRequests,
			LeaseValid:    own.Gate().Valid,
			Fence:         fences[i],
			Overflow:      overflow,
			Uploads:       overflow,
			OnCall:        e.metrics.Call,
			Failpoints:    e.opts.Failpoints,
			Tracer:        e.callTracer(),
			Tokens:        tokens,
			OnNoTokens:    noTokens,
		})
		if err != nil {
			return fmt.Errorf("engine: service %s: %w", svc.Name, err)
		}
		set.primaries = append(set.primaries, p)
		set.hosts = append(set.hosts, p)
		pid := e.actorSys.Spawn(p.Producer(), "primary", actors.SpawnOpts(svc.Name)...)
		set.primaryPIDs = append(set.primaryPIDs, pid)
		set.members = append(set.members, pid)
		set.named["primary:"+svc.Name] = pid
	}
	for i, h := range hosts {
		set.transfers = append(set.transfers, h)
		set.hosts = append(set.hosts, h)
		pid := h.Spawn(e.actorSys)
		set.members = append(set.members, pid)
		set.named[names[i]] = pid
	}
	if len(e.opts.Jobs) > 0 {
		set.jobs, err = actors.NewJobsHost(e.opts.Jobs, e.log, e.metrics.JobRun)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		set.jobsPID = e.actorSys.Spawn(set.jobs.Producer(), "jobs", actors.SpawnOpts("jobs")...)
		set.named["jobs"] = set.jobsPID
	}
	return nil
}

// watchBackend puts an opened backend under a backendhealth.Health: its failures are counted,
// logged and probed, and the set closes the health before the backend.
func (e *Engine) watchBackend(set *servingSet, service, adapter string, probe func(context.Context) (bool, error), closeBackend func() error) *backendhealth.Health {
	h := backendhealth.New(service, adapter, e.log, probe, e.metrics.BackendErrors.WithLabelValues(service, adapter).Inc,
		e.metrics.FencedWrites.WithLabelValues(service, adapter).Inc)
	set.health = append(set.health, h)
	set.closers = append(set.closers, closeBackend, h.Close)
	return h
}

// backendsDown lists the backends that are down, nil when every one answers.
func (s *servingSet) backendsDown() []error {
	var down []error
	for _, h := range s.health {
		if err := h.Down(); err != nil {
			down = append(down, err)
		}
	}
	return down
}

// waitSuccessor is the handover's successor check: the new holder's services answer
// at the broker for every endpoint of ours. A service whose backend is down here is
// not waited for: its callers get UNAVAILABLE from us either way (a retried "no
// responders" is no worse), and a successor on the same broken backend never
// subscribes it, so waiting would keep every other service answering beside the
// successor's until the phase's deadline.
func (s *servingSet) waitSuccessor(ctx context.Context, holder lease.Holder) error {
	down := make(map[string]bool, len(s.health))
	for _, h := range s.health {
		if h.Down() != nil {
			down[h.Service()] = true
		}
	}
	ps := make([]*primaries.Primary, 0, len(s.primaries))
	for _, p := range s.primaries {
		if !down[p.Name()] {
			ps = append(ps, p)
		}
	}
	return primaries.WaitSuccessor(ctx, s.askOn, holder.InstanceID, ps...)
}

// anyStandby is the handover's roll call: does any engine stand by to take over?
func (s *servingSet) anyStandby(ctx context.Context) (bool, error) {
	return control.AnyStandby(ctx, s.conn)
}

// waitSessions is the handover's second wait over every host (docs/design.md §3).
func (s *servingSet) waitSessions(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	return sessions.WaitForSessions(ctx, deadline, s.hosts...)
}

// stop ends everything the set serves at once; safe after a handover did it already.
func (s *servingSet) stop() {
	for _, h := range s.hosts {
		h.Stop()
	}
}

// answerBound bounds how long an ending engine waits for its primaries to answer the
// calls they had received when they stopped.
const answerBound = 5 * time.Second

// answerReceived waits, after stop and bounded by answerBound, until every primary has
// answered the calls it had received: a stopped primary drains its subscriptions and
// refuses what it finds queued (it ran nothing, so retryably), and those answers must
// be on the connection before it closes. This is what a resumed zombie owes the
// callers whose calls waited for it: a refusal they resend at once, not a timeout.
//
// A connection that is not connected gets no wait: nothing more arrives on it, its
// answers could not leave, and a subscription drained while it reconnects survives at
// the broker (sessions.WaitConnected), swallowing calls until the connection closes.
func (s *servingSet) answerReceived(ctx context.Context) {
	if !s.conn.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, answerBound)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range s.primaries {
		wg.Go(func() {
			if err := p.SessionsFinished(ctx); err != nil {
				s.log.Warn("calls left unanswered as the engine ends", zap.String("service", p.Name()), zap.Error(err))
			}
		})
	}
	wg.Wait()
}

// jobsCloseBound bounds the teardown's wait for job runs, cancelled already: a run that
// honours its context returns well within it, and one that does not must not use up
// the teardown bound the ownership's stop needs after it.
const jobsCloseBound = 2 * time.Second

// closeMembers ends the set's members, stopped already, in one order, each part
// bounded by ctx: first the primaries answer the calls they had received
// (answerReceived), before anything closes; then the actors are stopped and their
// hosts closed: a primary's actor is poisoned and the primary closed (its calls and
// role steps waited for); a transfer host closes itself and its actor; the jobs host's
// actor is poisoned and its runs waited for (jobsCloseBound). It reports whether every
// job run has returned: while one runs, the lease must not be released.
func (s *servingSet) closeMembers(ctx context.Context, sys *actor.Engine) (jobsEnded bool) {
	s.answerReceived(ctx)
	s.closeDiscovery(ctx, sys)
	for i, p := range s.primaries {
		<-sys.PoisonCtx(ctx, s.primaryPIDs[i]).Done()
		if err := p.Close(ctx); err != nil {
			s.log.Warn("closing a service", zap.String("service", p.Name()), zap.Error(err))
		}
	}
	for _, h := range s.transfers {
		if err := h.Close(ctx); err != nil {
			s.log.Warn("closing a transfer host", zap.Error(err))
		}
	}
	if s.jobs != nil {
		<-sys.PoisonCtx(ctx, s.jobsPID).Done()
		jctx, cancel := context.WithTimeout(ctx, jobsCloseBound)
		defer cancel()
		if err := s.jobs.Close(jctx); err != nil {
			s.log.Error("closing the jobs", zap.Error(err))
			return false
		}
	}
	return true
}

// close closes the backends, last opened first.
func (s *servingSet) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("closing a backend", zap.Error(err))
		}
	}
	s.closers = nil
}

// gauges are what a scrape of the metrics reads of the set.
func (s *servingSet) gauges() enginemetrics.Gauges {
	g := enginemetrics.Gauges{Sessions: s.openSessions()}
	for _, p := range s.primaries {
		g.InFlight = append(g.InFlight, enginemetrics.InFlight{Service: p.Name(), Calls: p.InFlight()})
	}
	if s.discovery != nil {
		g.Discovery = &enginemetrics.Discovery{Project: s.discovery.Project(), InFlight: s.discovery.InFlight(),
			Instances: s.discovery.Service().LiveInstances()}
	}
	for _, h := range s.health {
		g.Backends = append(g.Backends, enginemetrics.Backend{Service: h.Service(), Adapter: h.Adapter(), Up: h.Down() == nil})
	}
	return g
}
