package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// proxyFixture is a broker with JetStream, the requests' and the proxy's connections,
// the proxy's JetStream on its own, and a context bounding the test.
func proxyFixture(t *testing.T) (context.Context, *nats.Conn, *nats.Conn, js.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	nc, rc := natstest.Connect(t, srv.URL()), natstest.Connect(t, srv.URL())
	j, err := js.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, nc, rc, j
}

// RawProxy serves every set through its own responder into a scratch bucket, reports
// them, and leaves neither the bucket nor its subscriptions behind.
func TestRawProxy(t *testing.T) {
	ctx, nc, rc, j := proxyFixture(t)
	if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: "LIKE", History: 1, Storage: js.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(100)
	cfg.Workload = WorkloadSet
	rep, err := RawProxy(ctx, nc, rc, j, cfg, "LIKE")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != 100 || rep.Errors != 0 || rep.Config.Service != RawService || rep.Config.Workload != RawProxyWorkload || rep.Kinds[protocol.OpSet].Ops != 100 {
		t.Fatalf("ops %d errors %v config %+v kinds %v; want 100 sets through the proxy", rep.Ops, rep.ErrorsByCode, rep.Config, rep.Kinds)
	}
	c := Compare(rep, rep)
	c.Of = ProxyName
	if c.Against != ProxyName || !strings.HasPrefix(c.String(), "KV put proxy/KV put proxy: ") ||
		!strings.HasPrefix(SummarizeRounds([]Comparison{c}).String(), "KV put proxy/KV put proxy over 1 rounds") {
		t.Errorf("comparison %q, summary %q", c, SummarizeRounds([]Comparison{c}))
	}
	if n := rc.NumSubscriptions(); n > 1 {
		t.Errorf("%d subscriptions left on the proxy's connection, want at most its JetStream inbox", n)
	}
	names := j.StreamNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, "KV_ABI_BENCH_") {
			t.Errorf("scratch bucket %s left after the run", name)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
}

// The proxy really writes: a store that refuses the values (a bucket whose values may
// be at most 8 bytes) makes every set fail, as the store's answer reaches the requester.
func TestRawProxyReportsTheStoresRefusal(t *testing.T) {
	ctx, nc, rc, j := proxyFixture(t)
	if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: "SMALL", History: 1, Storage: js.MemoryStorage, MaxValueSize: 8}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(20)
	cfg.Workload, cfg.PayloadBytes = WorkloadSet, 64
	rep, err := RawProxy(ctx, nc, rc, j, cfg, "SMALL")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != 20 || rep.Errors != 20 || rep.ErrorsByCode[protocol.Unavailable] != 20 {
		t.Fatalf("ops %d errors %v; want every set refused by the store", rep.Ops, rep.ErrorsByCode)
	}
	bad := cfg
	bad.Workload = WorkloadGet
	if _, err := RawProxy(ctx, nc, rc, j, bad, "SMALL"); err == nil || !strings.Contains(err.Error(), "keyvalue set") {
		t.Errorf("a get workload: %v, want an error naming what RawProxy measures", err)
	}
	if _, err := RawProxy(ctx, nc, rc, j, cfg, "NONE"); err == nil || !strings.Contains(err.Error(), "NONE") {
		t.Errorf("a missing engine bucket: %v, want it named", err)
	}
}
