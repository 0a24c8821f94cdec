package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/fault"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/broker"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

// leaseStream is the JetStream stream behind the lease bucket.
const leaseStream = "KV_" + jetstreamstore.DefaultBucket

// harness is one scenario run: the broker, the engines, the traffic, the observer of
// the lease, what was recorded, and everything to tear down.
type harness struct {
	ctx    context.Context
	sc     Scenario
	opts   Options
	rng    *rand.Rand
	lease  time.Duration
	work   string
	logDir string
	start  time.Time

	srv      *broker.Server
	cluster  *broker.Cluster
	url      string
	replicas int

	nc      *nats.Conn
	rec     *bench.Recorder
	traffic *traffic

	mu      sync.Mutex
	events  []report.Event
	leaseEv []check.LeaseEvent
	checks  []check.Result
	members []member
	proxies []*fault.Proxy
	jobs    []bench.Op // runs of the probe job, as instants

	observer *observer
	nextName int
	// pgTable is the keyvalue table of a run on PostgreSQL (postgres.go), pg its
	// database, commits what storage committed to the keys watched (commits.go).
	pgTable string
	pg      *pgxpool.Pool
	commits commitLog
	// cycleStarts is when each fault cycle began (cycles.go).
	cycleStarts []time.Time
	// handovers are the handovers under traffic (handOver, handedOver), for the gaps
	// the report measures.
	handovers []report.Handover
	// secret is the service tokens' secret of the engines, in the file secretPath; nil
	// for none (protobuf.go).
	secret     []byte
	secretPath string
	// modules is the discovery scenario's module traffic (modules.go); nil in others.
	modules *moduleTraffic
	// leaders follows the leader of each stream on a cluster (storeleader.go); nil
	// until a scenario watches them.
	leaders *leaderWatch
	// nodeLogs are the cluster nodes' logs in the run's output (serverlogs.go).
	nodeLogs map[int]*nodeLog
}

func newHarness(ctx context.Context, sc Scenario, opts Options, work, logDir string) *harness {
	return &harness{
		ctx:      ctx,
		sc:       sc,
		opts:     opts,
		rng:      newRand(opts.Seed, sc.Name),
		lease:    opts.Lease,
		work:     work,
		logDir:   logDir,
		start:    time.Now(),
		rec:      bench.NewRecorder(true),
		replicas: 1,
	}
}

// logf writes a progress line with the time since the start.
func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.opts.Log, "  +%7.3fs %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

// event records an event now and logs it.
func (h *harness) event(kind, subject, format string, args ...any) time.Time {
	now := time.Now()
	h.eventAt(now, kind, subject, format, args...)
	return now
}

// eventAt records an event seen at at and logs it.
func (h *harness) eventAt(at time.Time, kind, subject, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.events = append(h.events, report.Event{At: at, Kind: kind, Subject: subject, Detail: detail})
	h.mu.Unlock()
	h.logf("%s %s: %s", kind, subject, detail)
}

// fault records an injected fault.
func (h *harness) fault(subject, format string, args ...any) time.Time {
	return h.event(report.KindFault, subject, format, args...)
}

// handOver records a fault that tells the serving engine to hand over to a standby,
// under traffic, and handedOver when the scenario saw it over: the report measures the
// callers' gap in between (report.Handovers).
func (h *harness) handOver(subject, format string, args ...any) {
	at := h.fault(subject, format, args...)
	h.mu.Lock()
	h.handovers = append(h.handovers, report.Handover{At: at})
	h.mu.Unlock()
}

func (h *harness) handedOver() {
	now := time.Now()
	h.mu.Lock()
	h.handovers[len(h.handovers)-1].Until = now
	h.mu.Unlock()
}

// check records checker results.
func (h *harness) check(rs ...check.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, rs...)
}

// expect records a result for a fact the scenario established itself, in the current
// cycle.
func (h *harness) expect(name string, ok bool, format string, args ...any) {
	r := check.Result{Name: name, Passed: ok, Summary: fmt.Sprintf(format, args...)}
	if !ok {
		r.Count, r.Details = 1, []string{r.Summary}
	}
	h.checkNow(r)
}

// sleep waits d as part of the fault schedule, or until the run is cancelled.
func (h *harness) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-h.ctx.Done():
		return h.ctx.Err()
	}
}

// between draws a duration uniformly from [lo, hi).
func (h *harness) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(h.rng.Int64N(int64(hi-lo)))
}

// waitFor is the harness's one bounded wait: it polls cond every 5 ms until it holds,
// within runs out, or the run is cancelled.
func (h *harness) waitFor(within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, within)
		}
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			return fmt.Errorf("%s: %w", what, h.ctx.Err())
		}
	}
	return nil
}

// startBroker starts a single JetStream broker, or with Options.Cluster a 3-node
// cluster (startCluster).
func (h *harness) startBroker() error {
	if h.opts.Cluster {
		return h.startCluster()
	}
	srv, err := broker.Start(filepath.Join(h.work, "broker"))
	if err != nil {
		return err
	}
	h.srv, h.url = srv, srv.URL()
	h.event(report.KindStep, "broker", "started at %s", srv.URL())
	return h.connect()
}

// startCluster starts a 3-node cluster; the buckets get 3 replicas.
func (h *harness) startCluster() error {
	ctx, cancel := context.WithTimeout(h.ctx, 60*time.Second)
	defer cancel()
	c, err := broker.StartCluster(ctx, filepath.Join(h.work, "cluster"))
	if err != nil {
		return err
	}
	h.cluster, h.url, h.replicas = c, c.URLs(), 3
	for i := range c.Nodes {
		h.logNode(i)
	}
	h.event(report.KindStep, "cluster", "3 nodes ready at %s", c.URLs())
	return h.connect()
}

// connect opens the harness's own connection (traffic and observer), which reconnects
// forever, and starts watching the lease.
func (h *harness) connect() error {
	nc, err := nats.Connect(h.url,
		nats.Name("abi-engine chaos harness"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.Timeout(2*time.Second),
		nats.RetryOnFailedConnect(false),
	)
	if err != nil {
		return fmt.Errorf("connect the harness to %s: %w", h.url, err)
	}
	h.nc = nc
	ob, err := h.observe()
	if err != nil {
		return err
	}
	h.observer = ob
	return nil
}

// transport is the traffic's client: the default retry policy unless Options say.
func (h *harness) transport() (*client.Transport, error) {
	var opts []client.Option
	if h.opts.Retry != nil {
		opts = append(opts, client.WithRetryPolicy(*h.opts.Retry))
	}
	return client.NewTransport(h.nc, h.clientOptions(opts...)...)
}

// traffic is the load running through bench.
type traffic struct {
	stop chan struct{}
	done chan struct{}
	rep  *bench.Report
	err  error
}

// startTraffic starts the load; stopTraffic ends it.
func (h *harness) startTraffic() error {
	tr, err := h.transport()
	if err != nil {
		return err
	}
	t := &traffic{stop: make(chan struct{}), done: make(chan struct{})}
	if w := h.opts.Workload; w != nil {
		go func() {
			defer close(t.done)
			start := time.Now()
			runWorkload(context.WithoutCancel(h.ctx), w, tr, h.opts, h.rec, t.stop)
			sum := h.rec.Summary()
			t.rep = &bench.Report{Throughput: float64(sum.Ops-sum.Errors-sum.Interrupted) / time.Since(start).Seconds()}
		}()
		h.traffic = t
		h.event(report.KindStep, "traffic", "%d workers, %s", h.opts.Concurrency, w.Name())
		return nil
	}
	cfg := trafficConfig(h.opts)
	var pb sync.WaitGroup
	if h.opts.Protobuf {
		pb.Go(func() { runProtobuf(context.WithoutCancel(h.ctx), tr, h.opts, h.rec, t.stop) })
	}
	go func() {
		defer close(t.done)
		t.rep, t.err = bench.Run(context.WithoutCancel(h.ctx), tr, cfg, bench.WithRecorder(h.rec), bench.StopOn(t.stop))
		pb.Wait()
	}()
	h.traffic = t
	h.event(report.KindStep, "traffic", "%d workers, keyvalue %s over %d keys", cfg.Concurrency, cfg.Workload, cfg.Keys)
	if h.opts.Protobuf {
		h.event(report.KindStep, "traffic", "and %d workers of the same mix in protobuf, as the Python clients call, over %d keys of their own", protobufWorkers(h.opts), cfg.Keys)
	}
	return nil
}

// stopTraffic ends the load: no new call, the calls in flight complete, the keys are
// deleted. It is idempotent.
func (h *harness) stopTraffic() error {
	t := h.traffic
	if t == nil {
		return nil
	}
	select {
	case <-t.stop:
	default:
		close(t.stop)
		h.event(report.KindStep, "traffic", "stopping")
	}
	<-t.done
	return t.err
}

// jobRun records a run of the probe job by instance.
func (h *harness) jobRun(instance string) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobs = append(h.jobs, bench.Op{Kind: "job", Key: "chaos-probe", Instance: instance, Invoke: now, Complete: now})
}

// jobRuns are the probe job's runs so far.
func (h *harness) jobRuns() []bench.Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bench.Op(nil), h.jobs...)
}

// history is every call recorded so far.
func (h *harness) history() []bench.Op { return h.rec.History() }

// addMember registers an engine for monitoring, reporting and teardown.
func (h *harness) addMember(m member) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.members = append(h.members, m)
}

// name gives the next engine's name, and whether it is the first engine of the run.
func (h *harness) name() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextName++
	return fmt.Sprintf("engine-%d", h.nextName), h.nextName == 1
}

// proxy puts a TCP proxy in front of the broker (a single one) for one engine.
func (h *harness) proxy() (*fault.Proxy, error) {
	if h.srv == nil {
		return nil, errors.New("a proxy needs the single broker")
	}
	p, err := fault.NewProxy(h.srv.Addr())
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.proxies = append(h.proxies, p)
	h.mu.Unlock()
	return p, nil
}

// serving lists when each engine served, from the monitors.
func (h *harness) serving() []check.Interval {
	var out []check.Interval
	for _, m := range h.allMembers() {
		out = append(out, m.servingIntervals()...)
	}
	return out
}

func (h *harness) allMembers() []member {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]member(nil), h.members...)
}

// leaseEvents is every lease value the observer saw.
func (h *harness) leaseEvents() []check.LeaseEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]check.LeaseEvent(nil), h.leaseEv...)
}

// waitTakeoverObserved waits until the lease observer has recorded an engine other than
// the holder before from: the checks read the observer's events, which arrive by watch
// and may trail what an engine already reports about itself.
func (h *harness) waitTakeoverObserved(from time.Time) {
	before := h.holderAt(from)
	_ = h.waitFor(2*h.lease, "the lease observer seeing the takeover", func() bool {
		for _, e := range h.leaseEvents() {
			if e.At.After(from) && e.Holder != before && e.Holder != "" && e.Holder != check.ForeignHolder {
				return true
			}
		}
		return false
	})
}

// holderAt is the lease holder the observer saw at t ("" when free or not yet seen).
func (h *harness) holderAt(t time.Time) string {
	holder := ""
	for _, e := range h.leaseEvents() {
		if e.At.After(t) {
			break
		}
		holder = e.Holder
	}
	return holder
}

// teardown stops everything the run started, in order: traffic, engines, proxies,
// the observer, the connection, the broker. It is safe after a failed setup.
func (h *harness) teardown() {
	h.mu.Lock()
	mt := h.modules
	h.mu.Unlock()
	if mt != nil {
		if _, err := mt.close(); err != nil {
			h.logf("modules: %v", err)
		}
	}
	if err := h.stopTraffic(); err != nil {
		h.logf("traffic: %v", err)
	}
	members := h.allMembers()
	// Every engine still running hands over or stops; processes get a grace period.
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { m.stop() })
	}
	wg.Wait()
	h.mu.Lock()
	proxies := h.proxies
	h.mu.Unlock()
	for _, p := range proxies {
		if err := p.Close(); err != nil {
			h.logf("proxy: %v", err)
		}
	}
	if h.commits != nil {
		h.commits.close()
	}
	h.dropPostgres()
	if h.observer != nil {
		h.observer.stop()
	}
	h.mu.Lock()
	leaders := h.leaders
	h.mu.Unlock()
	if leaders != nil {
		leaders.end()
	}
	if h.nc != nil {
		h.nc.Close()
	}
	if h.srv != nil {
		h.srv.Stop()
	}
	if h.cluster != nil {
		h.cluster.Stop()
		h.closeNodeLogs()
	}
}

// procRecords lists the processes started, for the leak check.
func (h *harness) procRecords() []check.Proc {
	var out []check.Proc
	for _, m := range h.allMembers() {
		if p, ok := m.(*procMember); ok {
			out = append(out, check.Proc{Name: p.nm, PID: p.p.PID(), Exited: p.p.Exited(), ExitCode: p.p.ExitCode()})
		}
	}
	return out
}

// report assembles the run's report (without the leak check, which runs after it).
func (h *harness) report(runErr error) *Report {
	elapsed := time.Since(h.start)
	hist := h.history()
	sum := h.rec.Summary()
	r := &Report{
		Scenario:    h.sc.Name,
		Description: h.sc.Description,
		Seed:        h.opts.Seed,
		Duration:    h.opts.Duration,
		Lease:       h.lease,
		Command:     Command(h.sc.Name, h.opts),
		Start:       h.start,
		Elapsed:     elapsed,
		Traffic:     sum,
	}
	if h.traffic != nil && h.traffic.rep != nil {
		r.Throughput = h.traffic.rep.Throughput
	}
	if runErr != nil {
		r.Error = runErr.Error()
	}
	h.mu.Lock()
	// A repeating scenario judged each cycle: one line per check, naming the cycles.
	r.Checks = check.Merge(h.checks)
	r.Events = append(r.Events, h.events...)
	h.mu.Unlock()
	sort.SliceStable(r.Events, func(i, j int) bool { return r.Events[i].At.Before(r.Events[j].At) })
	for _, m := range h.allMembers() {
		r.Instances = append(r.Instances, m.info())
	}
	r.Cycles = h.reportCycles(h.start.Add(elapsed))
	h.mu.Lock()
	var hvs []report.Handover
	for _, hv := range h.handovers {
		if hv.Until.IsZero() { // the run ended during it
			hv.Until = h.start.Add(elapsed)
		}
		hvs = append(hvs, hv)
	}
	r.Handovers = report.Handovers(hist, hvs)
	h.mu.Unlock()
	for _, o := range h.storeOutages() {
		r.StoreOutages = append(r.StoreOutages, report.StoreOutage{Stream: o.Instance, At: o.From, For: o.To.Sub(o.From)})
	}
	r.BucketWidth, r.Series = report.Series(hist, h.start, elapsed)
	return r
}

// describeHolder names a holder by engine name where the harness knows it.
func (h *harness) describeHolder(id string) string {
	switch id {
	case "":
		return "free"
	case check.ForeignHolder:
		return "foreign value"
	}
	for _, m := range h.allMembers() {
		if m.id() == id {
			return fmt.Sprintf("held by %s (%s)", m.name(), report.Short(id))
		}
	}
	return "held by " + report.Short(id)
}
