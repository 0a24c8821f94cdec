// Package natsevents hears the asynchronous errors of an engine's NATS connections and
// turns the two that lose work without a reply into something an operator sees:
// messages a slow subscription dropped and permissions the broker refused, counted by
// subject, logged, and kept for the engine's readiness.
package natsevents

import (
	"errors"
	"regexp"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Events hears the asynchronous errors of the engine's NATS connections
// (supervisor.ConnConfig.OnAsyncError) and turns the two that lose work without a
// reply into something an operator sees: messages a slow subscription dropped, counted
// by subject (abi_engine_dropped_messages_total), and permissions the broker refused,
// counted by subject (abi_engine_permission_violations_total), logged as JSON naming the
// subject, and kept, so a serving engine that cannot subscribe or publish what it needs
// reports not ready (Readiness) and /status says why.
type Events struct {
	log *zap.Logger

	mu      sync.Mutex
	dropped map[string]float64            // by subject, of subscriptions no longer watched
	watched map[*nats.Subscription]uint64 // slow subscriptions: their drops last seen
	denied  map[string]float64            // permission violations by subject
}

var (
	droppedDesc = prometheus.NewDesc("abi_engine_dropped_messages_total",
		"Messages a subscription of this engine dropped as a slow consumer (its pending limit reached), by subject: calls the engine never saw.", []string{"subject"}, nil)
	deniedDesc = prometheus.NewDesc("abi_engine_permission_violations_total",
		"Subscriptions and publishes the broker refused for want of a permission, by subject.", []string{"subject"}, nil)
)

// New is an Events that logs through log.
func New(log *zap.Logger) *Events {
	return &Events{log: log, dropped: map[string]float64{}, watched: map[*nats.Subscription]uint64{}, denied: map[string]float64{}}
}

// violationSubject finds the subject in the broker's text: Permissions Violation for
// Subscription to "abi.svc.keyvalue.v1.get" (or Publish to ...).
var violationSubject = regexp.MustCompile(`(?i)(subscription|publish) to "?([^"\s]+)"?`)

// AsyncError is supervisor.ConnConfig.OnAsyncError; the connection has logged err.
func (n *Events) AsyncError(sub *nats.Subscription, err error) {
	switch {
	case errors.Is(err, nats.ErrSlowConsumer) && sub != nil:
		n.mu.Lock()
		if _, ok := n.watched[sub]; !ok {
			n.watched[sub] = 0
		}
		n.settle()
		n.mu.Unlock()
		n.log.Warn("nats: slow consumer: messages dropped, their callers get no reply", zap.String("event", "slow_consumer"), zap.String("subject", sub.Subject))
	case errors.Is(err, nats.ErrPermissionViolation):
		subject := "unknown"
		what := "unknown"
		if m := violationSubject.FindStringSubmatch(err.Error()); m != nil {
			what, subject = m[1], m[2]
		}
		n.mu.Lock()
		n.denied[subject]++
		n.mu.Unlock()
		n.log.Error("nats: permission refused by the broker", zap.String("event", "permission_violation"),
			zap.String("operation", what), zap.String("subject", subject), zap.Error(err))
	}
}

// settle adds what each watched subscription dropped since it was last seen. n.mu held.
func (n *Events) settle() {
	for sub, seen := range n.watched {
		d, err := sub.Dropped()
		if err != nil { // closed: what it dropped is counted already
			delete(n.watched, sub)
			continue
		}
		if c := uint64(d); c > seen {
			n.dropped[sub.Subject] += float64(c - seen)
			n.watched[sub] = c
		}
	}
}

// DeniedSubjects are the subjects the broker refused, sorted; nil when none.
func (n *Events) DeniedSubjects() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.denied) == 0 {
		return nil
	}
	out := make([]string, 0, len(n.denied))
	for s := range n.denied {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Describe implements prometheus.Collector.
func (n *Events) Describe(ch chan<- *prometheus.Desc) {
	ch <- droppedDesc
	ch <- deniedDesc
}

// Collect implements prometheus.Collector.
func (n *Events) Collect(ch chan<- prometheus.Metric) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.settle()
	for s, v := range n.dropped {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, v, s)
	}
	for s, v := range n.denied {
		ch <- prometheus.MustNewConstMetric(deniedDesc, prometheus.CounterValue, v, s)
	}
}
