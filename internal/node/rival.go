package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/abi-engine/engine/internal/srvping"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// This file is the check an engine makes before it claims: that no engine it cannot see
// in its lease bucket serves the kernel services on the account. The lease decides
// between engines that share one lease bucket; engines that keep their leases in
// different JetStream domains (leaf nodes with JetStream of their own, and no
// nats.jetstream.domain) never meet there, and both would serve.

// Rival is an engine that holds no lease this engine can see and answers the kernel
// services on the account; Errors.Rival makes it the root package's *RivalError.
type Rival struct {
	// Instance and Version are the other engine's, from its services' answers.
	Instance, Version string
	// Services are the services it answered.
	Services []string
	// Domain is this engine's nats.jetstream.domain ("": the connected server's).
	Domain string
	// Holder is the lease this engine sees (zero: free).
	Holder lease.Holder
}

// rivalWatch is what the claim hands the watch of rivals: the lease bucket, and the
// holders the check before the claim read, which the watch alone adds to once it runs.
type rivalWatch struct {
	store leaseView
	known map[string]bool
}

// leaseView is what the rival check reads of the lease bucket.
type leaseView interface {
	Read(ctx context.Context) (lease.Record, error)
	ReadEpoch(ctx context.Context) (lease.EpochRecord, error)
}

// rivalServices are the services every engine serves, whose answers the check reads.
var rivalServices = []string{protocol.KeyValue, protocol.ObjectStorage}

// checkRivals is the check before the claim: a rival refuses it. The holders it reads
// are known to the watch of rivals (known).
func (e *Engine) checkRivals(ctx context.Context, nc *nats.Conn, store leaseView, known map[string]bool) error {
	rival, err := e.findRival(ctx, nc, store, known)
	if err != nil {
		return err
	}
	if rival != nil {
		return e.opts.Errors.Rival(*rival)
	}
	return nil
}

// findRival asks who answers the kernel services and returns the first engine that
// does and is neither this one, nor the lease's holder, nor the engine the epoch record
// names (a holder that released the lease and still drains), nor one known: the
// holders and epoch holders this engine read before, which findRival adds to known (a
// holder taken over may answer for a moment after it resumes); nil when there is none.
// An answer with no instance id (a Python engine, another program) is logged and let
// be: it cannot be told from a holder.
func (e *Engine) findRival(ctx context.Context, nc *nats.Conn, store leaseView, known map[string]bool) (*Rival, error) {
	answers, err := srvping.Ping(ctx, nc, rivalServices, srvping.DefaultWindow)
	if err != nil {
		return nil, fmt.Errorf("engine: ask who serves %s: %w", strings.Join(rivalServices, ", "), err)
	}
	if len(answers) == 0 {
		return nil, nil
	}
	rec, err := readHolders(ctx, store, known)
	if err != nil {
		return nil, err
	}
	known[e.InstanceID()] = true
	var rival *Rival
	for _, a := range answers {
		switch {
		case a.Instance == "":
			e.log.Debug("a service answers with no instance id: not an engine this one can tell from the lease's holder",
				zap.String("service", a.Service), zap.String("version", a.Version))
		case known[a.Instance]:
		case rival == nil:
			rival = &Rival{Instance: a.Instance, Version: a.Version, Services: []string{a.Service},
				Domain: e.cfg.NATS.JetStream.Domain, Holder: rec.Holder}
		case rival.Instance == a.Instance && !slices.Contains(rival.Services, a.Service):
			rival.Services = append(rival.Services, a.Service)
		}
	}
	return rival, nil
}

// readHolders adds the lease's holder and the epoch record's to known, and returns the
// lease record.
func readHolders(ctx context.Context, store leaseView, known map[string]bool) (lease.Record, error) {
	rec, err := store.Read(ctx)
	if err != nil {
		return rec, fmt.Errorf("engine: read the lease: %w", err)
	}
	// An unreadable epoch record names nobody; the lease's holder still counts.
	ep, _ := store.ReadEpoch(ctx)
	known[rec.Holder.InstanceID], known[ep.InstanceID] = true, true
	return rec, nil
}

// rivalPace is how often a serving engine looks for a rival: every renewal period
// (lease/4), but no more often than rivalMinPace.
func rivalPace(leaseDur time.Duration) time.Duration { return max(leaseDur/4, rivalMinPace) }

const rivalMinPace = 250 * time.Millisecond

// yieldTo decides, for a serving engine (me) that has seen rival answer since
// firstSeen, whether it stops now. A rival is confirmed only once it has answered for
// a pace: an engine that resumes after a pause may answer for a moment before it finds
// itself fenced. Two engines that see each other must not both stop (nobody would
// serve) nor both stay: the one with the greater instance id stops once the rival is
// confirmed, and the other once the rival has gone on answering for grace, since an
// engine of a version without this watch never stops.
func yieldTo(me, rival string, firstSeen, now time.Time, pace, grace time.Duration) bool {
	seen := now.Sub(firstSeen)
	return me > rival && seen >= pace || seen >= grace
}

// watchRivals looks, while the engine serves, for an engine that serves the kernel
// services with a lease this one cannot see (both started at once, or one of a version
// that does not check at start), and ends this engine when yieldTo says so: the
// teardown releases the lease, and the end's error is the root package's *RivalError
// (exit 3).
func (e *Engine) watchRivals() {
	nc, store, known := e.leaseConn, e.rivals.store, e.rivals.known
	if nc == nil || store == nil {
		return
	}
	pace := rivalPace(e.cfg.NATS.Engine.Lease())
	grace := 3 * pace
	// base ends with the watch, or at once when the engine stops it, so a Shutdown does
	// not wait out a ping in flight.
	base, cancelBase := context.WithCancel(context.Background())
	e.watchers.Add(2)
	go func() {
		defer e.watchers.Done()
		select {
		case <-e.stopWatch:
			cancelBase()
		case <-base.Done():
		}
	}()
	go func() {
		defer e.watchers.Done()
		defer cancelBase()
		t := time.NewTicker(pace)
		defer t.Stop()
		var seen string
		var firstSeen time.Time
		for {
			select {
			case <-base.Done():
				return
			case <-t.C:
			}
			// A ping waits for answers up to its window, whatever the pace.
			ctx, cancel := context.WithTimeout(base, pace+srvping.DefaultWindow.Max)
			if !e.View().Serving() {
				// A standby learns the holders it may later see answer after a takeover.
				_, _ = readHolders(ctx, store, known)
				cancel()
				seen = ""
				continue
			}
			rival, err := e.findRival(ctx, nc, store, known)
			cancel()
			switch {
			case err != nil:
				e.log.Debug("could not look for another serving engine", zap.Error(err))
				continue
			case rival == nil:
				seen = ""
				continue
			case rival.Instance != seen:
				seen, firstSeen = rival.Instance, time.Now()
			}
			rivalErr := e.opts.Errors.Rival(*rival)
			if !yieldTo(e.InstanceID(), rival.Instance, firstSeen, time.Now(), pace, grace) {
				e.log.Error("another engine serves this account with a lease this one cannot see: waiting for it to stop",
					zap.String("other", rival.Instance), zap.Error(rivalErr))
				continue
			}
			e.log.Error("engine ending: another engine serves this account with a lease this one cannot see", zap.Error(rivalErr))
			e.beginEnd(endOnItsOwn, rivalErr)
			return
		}
	}()
}
