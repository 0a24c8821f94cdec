// Package rivals finds an engine that serves the kernel services on the account with a
// lease this engine cannot see. The lease decides between engines that share one lease
// bucket; engines that keep their leases in different JetStream domains (leaf nodes
// with JetStream of their own, and no nats.jetstream.domain) never meet there, and both
// would serve. So an engine asks who answers the kernel services before it claims
// (Finder.Find), and goes on asking while it serves (Finder.Watch), which tells it when
// to yield (yieldTo).
package rivals

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

// Rival is an engine that holds no lease this engine can see and answers the kernel
// services on the account (the root package's *RivalError).
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

// LeaseView is what the rival check reads of the lease bucket.
type LeaseView interface {
	Read(ctx context.Context) (lease.Record, error)
	ReadEpoch(ctx context.Context) (lease.EpochRecord, error)
}

// services are the services every engine serves, whose answers the check reads.
var services = []string{protocol.KeyValue, protocol.ObjectStorage}

// Finder asks who answers the kernel services on conn. It remembers the holders it
// read in the lease bucket (known): the check before the claim learns them, and the
// watch alone adds to them once it runs.
type Finder struct {
	conn   *nats.Conn
	store  LeaseView
	me     string // this engine's instance id
	domain string // this engine's nats.jetstream.domain
	log    *zap.Logger
	known  map[string]bool
}

// NewFinder is the Finder of the engine me, asking on conn and reading store.
func NewFinder(conn *nats.Conn, store LeaseView, me, domain string, log *zap.Logger) *Finder {
	return &Finder{conn: conn, store: store, me: me, domain: domain, log: log, known: map[string]bool{}}
}

// Find asks who answers the kernel services and returns the first engine that does
// and is neither this one, nor the lease's holder, nor the engine the epoch record
// names (a holder that released the lease and still drains), nor one known: the
// holders and epoch holders this engine read before, which Find adds to known (a
// holder taken over may answer for a moment after it resumes); nil when there is none.
// An answer with no instance id (a Python engine, another program) is logged and let
// be: it cannot be told from a holder.
func (f *Finder) Find(ctx context.Context) (*Rival, error) {
	answers, err := srvping.Ping(ctx, f.conn, services, srvping.DefaultWindow)
	if err != nil {
		return nil, fmt.Errorf("engine: ask who serves %s: %w", strings.Join(services, ", "), err)
	}
	if len(answers) == 0 {
		return nil, nil
	}
	rec, err := f.readHolders(ctx)
	if err != nil {
		return nil, err
	}
	f.known[f.me] = true
	var rival *Rival
	for _, a := range answers {
		switch {
		case a.Instance == "":
			f.log.Debug("a service answers with no instance id: not an engine this one can tell from the lease's holder",
				zap.String("service", a.Service), zap.String("version", a.Version))
		case f.known[a.Instance]:
		case rival == nil:
			rival = &Rival{Instance: a.Instance, Version: a.Version, Services: []string{a.Service},
				Domain: f.domain, Holder: rec.Holder}
		case rival.Instance == a.Instance && !slices.Contains(rival.Services, a.Service):
			rival.Services = append(rival.Services, a.Service)
		}
	}
	return rival, nil
}

// readHolders adds the lease's holder and the epoch record's to known, and returns the
// lease record.
func (f *Finder) readHolders(ctx context.Context) (lease.Record, error) {
	rec, err := f.store.Read(ctx)
	if err != nil {
		return rec, fmt.Errorf("engine: read the lease: %w", err)
	}
	// An unreadable epoch record names nobody; the lease's holder still counts.
	ep, _ := f.store.ReadEpoch(ctx)
	f.known[rec.Holder.InstanceID], f.known[ep.InstanceID] = true, true
	return rec, nil
}

// Pace is how often a serving engine looks for a rival: every renewal period
// (lease/4), but no more often than minPace.
func Pace(leaseDur time.Duration) time.Duration { return max(leaseDur/4, minPace) }

const minPace = 250 * time.Millisecond

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

// Watch looks every pace, until ctx ends, for an engine that serves the kernel
// services with a lease this one cannot see, while serving() says this engine serves
// (a standby only learns the holders it may later see answer after a takeover), and
// calls end with the rival (as asError makes it) when yieldTo says this engine stops;
// it returns then. It runs on its caller's goroutine, which owns it.
func (f *Finder) Watch(ctx context.Context, pace time.Duration, serving func() bool, asError func(Rival) error, end func(error)) {
	grace := 3 * pace
	t := time.NewTicker(pace)
	defer t.Stop()
	var seen string
	var firstSeen time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A ping waits for answers up to its window, whatever the pace.
		pctx, cancel := context.WithTimeout(ctx, pace+srvping.DefaultWindow.Max)
		if !serving() {
			_, _ = f.readHolders(pctx)
			cancel()
			seen = ""
			continue
		}
		rival, err := f.Find(pctx)
		cancel()
		switch {
		case err != nil:
			f.log.Debug("could not look for another serving engine", zap.Error(err))
			continue
		case rival == nil:
			seen = ""
			continue
		case rival.Instance != seen:
			seen, firstSeen = rival.Instance, time.Now()
		}
		rivalErr := asError(*rival)
		if !yieldTo(f.me, rival.Instance, firstSeen, time.Now(), pace, grace) {
			f.log.Error("another engine serves this account with a lease this one cannot see: waiting for it to stop",
				zap.String("other", rival.Instance), zap.Error(rivalErr))
			continue
		}
		f.log.Error("engine ending: another engine serves this account with a lease this one cannot see", zap.Error(rivalErr))
		end(rivalErr)
		return
	}
}
