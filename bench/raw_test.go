package bench

import (
	"strings"
	"testing"
	"time"
)

func TestRawNATS(t *testing.T) {
	f := newFixture(t)
	cfg := testConfig(200)
	rep, err := RawNATS(t.Context(), f.nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != 200 || rep.Errors != 0 || rep.Mismatches != 0 || rep.Throughput <= 0 || rep.Latency.P99 <= 0 {
		t.Fatalf("ops %d errors %v mismatches %d throughput %v p99 %s; want 200 echoes, all fine",
			rep.Ops, rep.ErrorsByCode, rep.Mismatches, rep.Throughput, rep.Latency.P99)
	}
	if rep.Config.Service != RawService || rep.Config.Workload != RawWorkload || rep.Kinds[KindEcho].Ops != 200 {
		t.Errorf("config %+v kinds %v, want the echo of raw NATS", rep.Config, rep.Kinds)
	}
	// The responder is gone afterwards: a second run leaves no more subscriptions than
	// the first (which leaves only nats.go's request inbox).
	after := f.nc.NumSubscriptions()
	if _, err := RawNATS(t.Context(), f.nc, cfg, WithoutHistory()); err != nil {
		t.Fatal(err)
	}
	if n := f.nc.NumSubscriptions(); n != after || n > 1 {
		t.Errorf("%d subscriptions after the second run, %d after the first; want the request inbox only", n, after)
	}
}

func TestRawNATSOnSecondConnection(t *testing.T) {
	f := newFixture(t)
	rc := f.conn(t)
	cfg := testConfig(0)
	cfg.Duration = 30 * time.Millisecond
	cfg.PayloadBytes = 16 * 1024
	rep, err := RawNATS(t.Context(), f.nc, cfg, WithResponderConn(rc), WithoutHistory())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops == 0 || rep.Errors != 0 || rep.Mismatches != 0 || rep.StoppedBy != StoppedByDuration || rep.History != nil {
		t.Fatalf("ops %d errors %v mismatches %d stopped by %q history %d", rep.Ops, rep.ErrorsByCode, rep.Mismatches, rep.StoppedBy, len(rep.History))
	}
	if rc.NumSubscriptions() != 0 {
		t.Errorf("%d subscriptions left on the responder's connection", rc.NumSubscriptions())
	}
	bad := cfg
	bad.PayloadBytes = 2 << 20
	if _, err := RawNATS(t.Context(), f.nc, bad); err == nil {
		t.Error("a payload over the max payload was accepted")
	}
}

// With WithInstanceHeader the echo stamps the instance header, the requester checks
// it, and the report and its comparison say which echo it was.
func TestRawNATSWithInstanceHeader(t *testing.T) {
	f := newFixture(t)
	const id = "0123456789abcdef0123456789abcdef"
	rep, err := RawNATS(t.Context(), f.nc, testConfig(100), WithResponderConn(f.conn(t)), WithInstanceHeader(id))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops != 100 || rep.Errors != 0 || rep.Mismatches != 0 || rep.Config.Workload != RawHeaderWorkload {
		t.Fatalf("ops %d errors %v mismatches %d workload %q; want 100 header echoes", rep.Ops, rep.ErrorsByCode, rep.Mismatches, rep.Config.Workload)
	}
	if rep.Instances[id] != 100 {
		t.Errorf("instances %v, want every reply from %s", rep.Instances, id)
	}
	if c := Compare(rep, rep); c.Against != "header echo" || !strings.HasPrefix(c.String(), "engine/header echo: ") {
		t.Errorf("comparison %q against %q", c.String(), c.Against)
	}
	if _, err := RawNATS(t.Context(), f.nc, testConfig(1), WithInstanceHeader("")); err == nil {
		t.Error("an empty instance id was taken")
	}
	if _, err := Run(t.Context(), f.tr, testConfig(1), WithInstanceHeader(id)); err == nil {
		t.Error("Run took WithInstanceHeader")
	}
}
