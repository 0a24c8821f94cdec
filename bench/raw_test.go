package bench

import (
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
