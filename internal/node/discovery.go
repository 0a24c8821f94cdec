package node

import (
	"context"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/discovery"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
)

// This file wires the module registry (package discovery, docs/discovery.md) into a
// serving engine when nats.discovery is set: its bucket is opened with the backends
// (openStores), and its member is the first of the members the root tells to serve,
// stop accepting and stop, so it serves only while this engine holds the lease and
// hands over with it.

// buildDiscovery spawns the discovery member on the registry's bucket (openStores
// opened it), when nats.discovery is set.
func (e *Engine) buildDiscovery(set *servingSet, store *discovery.JetStreamStore, tokens primaries.TokenVerifier) error {
	d := e.cfg.NATS.Discovery
	if d == nil {
		return nil
	}
	svc, err := discovery.New(store, discovery.Config{Lease: d.Lease(), Failpoints: e.opts.Failpoints})
	if err != nil {
		return fmt.Errorf("engine: nats.discovery: %w", err)
	}
	var verify discovery.TokenVerifier
	if tokens != nil {
		verify = tokens
	} else {
		e.log.Warn("nats.discovery is on but nats.jwt_secret_file is not set: every discovery call is refused UNAUTHENTICATED")
	}
	m, err := discovery.NewMember(discovery.MemberConfig{
		Conn: set.conn, Project: d.Project, Service: svc, Tokens: verify,
		MaxConcurrent: e.cfg.NATS.MaxConcurrentRequests, Logger: e.log,
		OnCall: discoveryCalls(e.metrics.Call),
	})
	if err != nil {
		return fmt.Errorf("engine: nats.discovery: %w", err)
	}
	set.discovery = m
	set.discoPID = m.Spawn(e.actorSys)
	set.members = append(set.members, set.discoPID)
	set.named["discovery"] = set.discoPID
	e.log.Info("module discovery on", zap.String("project", d.Project), zap.Float64("lease_seconds", d.LeaseSeconds),
		zap.String("bucket", discovery.Bucket(d.Project)))
	return nil
}

// closeDiscovery stops the member's actor, then ends what it still serves and waits
// for its calls, bounded by ctx.
func (s *servingSet) closeDiscovery(ctx context.Context, sys *actor.Engine) {
	if s.discovery == nil {
		return
	}
	<-sys.PoisonCtx(ctx, s.discoPID).Done()
	if err := s.discovery.Close(ctx); err != nil {
		s.log.Warn("closing discovery", zap.Error(err))
	}
}

// discoveryService labels the discovery member's calls in the request metrics.
const discoveryService = "discovery"

// discoveryCalls counts the member's calls in abi_engine_requests_total and
// abi_engine_request_duration_seconds beside the services', with one observer per
// operation made up front (the hot path then looks nothing up). The member answers
// "OK" for success, which the metrics count as the services' success.
func discoveryCalls(observe func(service, operation string) primaries.CallObserver) func(op, code string, d time.Duration) {
	obs := make(map[string]primaries.CallObserver, len(discovery.Operations))
	for _, op := range discovery.Operations {
		obs[op] = observe(discoveryService, op)
	}
	return func(op, code string, d time.Duration) {
		o, ok := obs[op]
		if !ok {
			return
		}
		if code == "OK" {
			code = ""
		}
		o(protocol.Code(code), d)
	}
}
