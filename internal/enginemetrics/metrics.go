// Package enginemetrics is the engine's Prometheus metrics, all prefixed abi_engine_:
// the counters the engine's parts add to as things happen (lease events, calls, job
// runs, backend errors, panics), and the gauges a scrape reads of the engine at that
// moment (its state from the one view, and the serving set's in-flight calls, sessions,
// backends and discovery registry).
package enginemetrics

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natsevents"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
)

// metrics are the engine's Prometheus metrics, all prefixed abi_engine_ (docs/design.md §4.5).
type Metrics struct {
	view func() Scrape // where the engine stands, read at each scrape
	auto bool          // the engine's role is auto: a refusal makes it a client

	renewals       *prometheus.CounterVec
	fences         prometheus.Counter
	takeovers      prometheus.Counter
	leaseEvents    *prometheus.CounterVec
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	handover       *prometheus.GaugeVec
	jobRuns        *prometheus.CounterVec
	BackendErrors  *prometheus.CounterVec
	FencedWrites   *prometheus.CounterVec
	Panics         *prometheus.CounterVec
	PanicCount     atomic.Uint64 // the sum of panics, for /status
	LoadSeconds    prometheus.Gauge
	ClientCounters *client.Counters
	NATS           *natsevents.Events // slow consumers and permission violations

	mu      sync.Mutex
	serving func() Gauges // the serving set's, nil until there is one
}

// Scrape is what a scrape reads of where the engine stands.
type Scrape struct {
	State           string // one of the label values of abi_engine_state
	Revision, Epoch uint64 // the lease's, 0 when the engine holds none
}

// Gauges are what a scrape reads of a serving (or standby) engine's members.
type Gauges struct {
	InFlight  []InFlight // by service
	Sessions  int        // open transfer and overflow sessions
	Discovery *Discovery // nil when nats.discovery is off
	Backends  []Backend
}

// InFlight counts a service's calls received and not yet answered.
type InFlight struct {
	Service string
	Calls   int
}

// Discovery is the module registry's gauges.
type Discovery struct {
	Project   string
	InFlight  int // calls received and not yet answered
	Instances int // live instances, as this engine last read or wrote the registry
}

// Backend is whether a service's backend answers.
type Backend struct {
	Service, Adapter string
	Up               bool
}

var (
	stateDesc     = prometheus.NewDesc("abi_engine_state", "1 for the engine's current state (idle, standby, serving, fenced, lost, released, client).", []string{"state"}, nil)
	revisionDesc  = prometheus.NewDesc("abi_engine_lease_revision", "The lease revision this engine holds (0 when it holds none).", nil, nil)
	epochDesc     = prometheus.NewDesc("abi_engine_lease_epoch", "The epoch this engine holds: the fencing token its shared backends check, which changes only when ownership changes (0 when it holds none).", nil, nil)
	inFlightDesc  = prometheus.NewDesc("abi_engine_in_flight_calls", "Calls received and not yet answered, by service.", []string{"service"}, nil)
	sessionsDesc  = prometheus.NewDesc("abi_engine_open_sessions", "Open transfer and overflow sessions.", nil, nil)
	clientDesc    = prometheus.NewDesc("abi_engine_client_calls_total", "Calls made by this engine's NATS clients (client role), by outcome.", []string{"outcome"}, nil)
	discoveryDesc = prometheus.NewDesc("abi_engine_discovery_instances",
		"Live module instances in the discovery registry, as this engine last read or wrote it.", []string{"project"}, nil)
	backendDesc = prometheus.NewDesc("abi_engine_backend_up", "1 while a service's backend answers, 0 while its probe fails, by service and backend.", []string{"service", "backend"}, nil)
)

// allStates are the values of abi_engine_state's label, in the order of /status's docs.
var allStates = []string{"idle", lease.StateStandby.String(), lease.StateServing.String(), lease.StateFenced.String(),
	lease.StateLost.String(), lease.StateReleased.String(), "client"}

// New registers the engine's metrics in reg: auto is whether the engine's role is
// auto, version its version (build_info), view how a scrape reads where it stands.
func New(reg prometheus.Registerer, auto bool, version string, log *zap.Logger, view func() Scrape) (*Metrics, error) {
	m := &Metrics{
		view: view,
		auto: auto,
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "abi_engine_lease_renewals_total",
			Help: "Lease renewals by result (ok, failed)."}, []string{"result"}),
		fences: prometheus.NewCounter(prometheus.CounterOpts{Name: "abi_engine_lease_fences_total",
			Help: "Times this engine fenced itself for want of a renewal."}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "abi_engine_lease_takeovers_total",
			Help: "Times this engine took the lease over from a silent holder."}),
		leaseEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "abi_engine_lease_events_total",
			Help: "Lease events by kind."}, []string{"event"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "abi_engine_requests_total",
			Help: "Calls answered, by service, operation and code (OK for success)."}, []string{"service", "operation", "code"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "abi_engine_request_duration_seconds",
			Help: "Time from receipt to reply, by service and operation.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)},
			[]string{"service", "operation"}),
		handover: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "abi_engine_handover_phase_seconds",
			Help: "Duration of each phase of the last handover."}, []string{"phase"}),
		jobRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "abi_engine_job_runs_total",
			Help: "Job runs by job and result (ok, failed)."}, []string{"job", "result"}),
		BackendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "abi_engine_backend_errors_total",
			Help: "Calls that failed in a service's backend (UNAVAILABLE, INTERNAL), by service and backend."}, []string{"service", "backend"}),
		FencedWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "abi_engine_fenced_writes_total",
			Help: "Writes a shared backend refused because this engine's epoch was stale (another engine took over), by service and backend."}, []string{"service", "backend"}),
		Panics: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "abi_engine_actor_panics_total",
			Help: "Actor panics recovered (the actor was restarted in place), by actor kind."}, []string{"actor"}),
		LoadSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "abi_engine_load_seconds",
			Help: "How long Load took."}),
		ClientCounters: client.NewCounters(),
		NATS:           natsevents.New(log),
	}
	// The collectors every Go service exposes (docs/design.md §4.5). An embedder's registry
	// (WithRegistry) may hold them already.
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return nil, err
		}
	}
	for _, c := range []prometheus.Collector{m.renewals, m.fences, m.takeovers, m.leaseEvents, m.requests,
		m.requestSeconds, m.handover, m.jobRuns, m.BackendErrors, m.FencedWrites, m.Panics, m.LoadSeconds, m.NATS, m, buildInfo(version)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// buildInfo is abi_engine_build_info, always 1: the version of each scraped engine as a
// label, so a dashboard or an alert can tell which version runs where (and a rollout's
// two versions apart) with a join, as Prometheus' own *_build_info metrics do.
func buildInfo(version string) prometheus.Collector {
	if version == "" {
		version = "dev"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "abi_engine_build_info",
		Help:        "Always 1; its labels are the engine's version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}})
	g.Set(1)
	return g
}

// AsyncError is every connection's supervisor.ConnConfig.OnAsyncError.
func (m *Metrics) AsyncError(sub *nats.Subscription, err error) { m.NATS.AsyncError(sub, err) }

// LeaseEvent counts a lease event (the ownership actor's OnEvent). An auto engine
// refused becomes a client: that is counted as event="client", so "refused", which
// operations.md says to alert on, counts only engines that could not start.
func (m *Metrics) LeaseEvent(ev lease.Event) {
	kind := ev.Kind.String()
	if ev.Kind == lease.EventRefused && m.auto {
		kind = "client"
	}
	m.leaseEvents.WithLabelValues(kind).Inc()
	switch ev.Kind {
	case lease.EventRenewed:
		m.renewals.WithLabelValues("ok").Inc()
	case lease.EventRenewFailed:
		m.renewals.WithLabelValues("failed").Inc()
	case lease.EventFenced:
		m.fences.Inc()
	case lease.EventTookOver:
		m.takeovers.Inc()
	}
}

// Call is primaries.Config.OnCall: the observer of one operation's calls, holding its
// metric handles, so a call costs two atomic updates and no label lookup (which hashes
// every label value and takes a lock, a few per cent of a busy engine's CPU). A
// counter per code is made the first time a call ends with that code.
func (m *Metrics) Call(service, operation string) primaries.CallObserver {
	seconds := m.requestSeconds.WithLabelValues(service, operation)
	byCode := make([]atomic.Pointer[prometheus.Counter], len(protocol.Codes)+1) // OK first, then protocol.Codes
	return func(code protocol.Code, d time.Duration) {
		seconds.Observe(d.Seconds())
		i := codeIndex(code)
		if i < 0 { // not a code of the protocol: looked up by its label
			m.requests.WithLabelValues(service, operation, string(code)).Inc()
			return
		}
		c := byCode[i].Load()
		if c == nil {
			label := "OK"
			if code != "" {
				label = string(code)
			}
			made := m.requests.WithLabelValues(service, operation, label) // the same child every time
			c = &made
			byCode[i].Store(c)
		}
		(*c).Inc()
	}
}

// codeIndex is the index of code in Call's byCode: 0 for success, -1 for a code the
// protocol does not have.
func codeIndex(code protocol.Code) int {
	if code == "" {
		return 0
	}
	for i, c := range protocol.Codes {
		if c == code {
			return i + 1
		}
	}
	return -1
}

// HandoverPhase is the root's OnPhase: how long a phase of the last handover took.
func (m *Metrics) HandoverPhase(phase actors.Phase, d time.Duration) {
	m.handover.WithLabelValues(phase.String()).Set(d.Seconds())
}

// JobRun counts a job's run by its result.
func (m *Metrics) JobRun(job string, _ time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.jobRuns.WithLabelValues(job, result).Inc()
}

// WatchServing makes every scrape read the serving set's gauges.
func (m *Metrics) WatchServing(gauges func() Gauges) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.serving = gauges
}

// Describe implements prometheus.Collector for the values read at scrape time.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{stateDesc, revisionDesc, epochDesc, inFlightDesc, sessionsDesc, clientDesc, backendDesc, discoveryDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	view := m.view()
	for _, s := range allStates {
		v := 0.0
		if s == view.State {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, s)
	}
	ch <- prometheus.MustNewConstMetric(revisionDesc, prometheus.GaugeValue, float64(view.Revision))
	ch <- prometheus.MustNewConstMetric(epochDesc, prometheus.GaugeValue, float64(view.Epoch))
	m.mu.Lock()
	serving := m.serving
	m.mu.Unlock()
	if serving != nil {
		g := serving()
		for _, f := range g.InFlight {
			ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(f.Calls), f.Service)
		}
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(g.Sessions))
		if d := g.Discovery; d != nil {
			ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(d.InFlight), "discovery")
			ch <- prometheus.MustNewConstMetric(discoveryDesc, prometheus.GaugeValue, float64(d.Instances), d.Project)
		}
		for _, b := range g.Backends {
			up := 0.0
			if b.Up {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(backendDesc, prometheus.GaugeValue, up, b.Service, b.Adapter)
		}
	}
	st := m.ClientCounters.Snapshot()
	ch <- prometheus.MustNewConstMetric(clientDesc, prometheus.CounterValue, float64(st.Calls), "calls")
	ch <- prometheus.MustNewConstMetric(clientDesc, prometheus.CounterValue, float64(st.Retries), "retries")
	ch <- prometheus.MustNewConstMetric(clientDesc, prometheus.CounterValue, float64(st.GiveUps), "give_ups")
	ch <- prometheus.MustNewConstMetric(clientDesc, prometheus.CounterValue, float64(st.NoResponders), "no_responders")
	ch <- prometheus.MustNewConstMetric(clientDesc, prometheus.CounterValue, float64(st.OverflowResends), "overflow_resends")
}
