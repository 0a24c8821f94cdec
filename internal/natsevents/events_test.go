package natsevents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	"github.com/abi-engine/engine/supervisor"
)

// dialWith connects to url through supervisor.Dial, the engine's way, with ev hearing
// the connection's asynchronous errors.
func dialWith(t *testing.T, url string, ev *Events, log *zap.Logger, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := supervisor.Dial(context.Background(), supervisor.ConnConfig{URL: url, Name: "test", Options: opts,
		OnAsyncError: ev.AsyncError, ConnectTimeout: 5 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// A subscription that falls behind drops messages: they are counted by subject and the
// event is logged as JSON naming the subject. Before, nats.go printed a bare line and
// nothing counted them.
func TestSlowConsumerDropsAreCountedBySubject(t *testing.T) {
	srv := natstest.Start(t)
	core, logs := observer.New(zap.WarnLevel)
	ev := New(zap.New(core))
	nc := dialWith(t, srv.URL(), ev, zap.New(core))
	release := make(chan struct{})
	sub, err := nc.Subscribe("abi.svc.slow.v1.op", func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release) })
	if err := sub.SetPendingLimits(10, -1); err != nil {
		t.Fatal(err)
	}
	// The subscription must be at the broker before the other connection publishes, or
	// the messages reach nobody and nothing is dropped.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := natstest.Connect(t, srv.URL())
	for range 100 {
		if err := pub.Publish("abi.svc.slow.v1.op", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the drops counted", func() bool {
		n, _ := sub.Dropped()
		return n > 0 && sample(ev, droppedDesc) == float64(n)
	})
	found := logs.FilterField(zap.String("subject", "abi.svc.slow.v1.op")).FilterField(zap.String("event", "slow_consumer"))
	if found.Len() == 0 {
		t.Fatalf("no slow-consumer log entry naming the subject: %v", logs.All())
	}
}

// sample sums what ev collects of the metric d.
func sample(ev *Events, d *prometheus.Desc) float64 {
	all := make(chan prometheus.Metric, 64)
	ev.Collect(all)
	close(all)
	sum := 0.0
	for m := range all {
		if m.Desc() != d {
			continue
		}
		var out dto.Metric
		if err := m.Write(&out); err == nil {
			sum += out.GetCounter().GetValue()
		}
	}
	return sum
}

// A permission the broker refuses is logged as JSON naming the subject, counted, and
// kept: DeniedSubjects is what makes a serving engine not ready.
func TestPermissionViolationsAreLoggedCountedAndKept(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "abi", Password: "pw", Permissions: &server.Permissions{
			Subscribe: &server.SubjectPermission{Deny: []string{"abi.svc.keyvalue.>"}},
		}}}
	})
	core, logs := observer.New(zap.WarnLevel)
	ev := New(zap.New(core))
	nc := dialWith(t, srv.URL(), ev, zap.New(core), nats.UserInfo("abi", "pw"))
	if _, err := nc.Subscribe("abi.svc.keyvalue.v1.get", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	testwait.For(t, 10*time.Second, "the violation heard", func() bool { return len(ev.DeniedSubjects()) > 0 })
	if got := ev.DeniedSubjects(); len(got) != 1 || got[0] != "abi.svc.keyvalue.v1.get" {
		t.Fatalf("denied subjects %v", got)
	}
	entries := logs.FilterField(zap.String("subject", "abi.svc.keyvalue.v1.get")).All()
	if len(entries) == 0 || !strings.Contains(entries[len(entries)-1].Message, "permission") {
		t.Fatalf("no permission log entry naming the subject: %v", logs.All())
	}
	if v := sample(ev, deniedDesc); v != 1 {
		t.Fatalf("abi_engine_permission_violations_total = %g", v)
	}
}
