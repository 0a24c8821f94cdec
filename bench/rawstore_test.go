package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

// RawStore writes into a scratch bucket shaped like the engine's, reports the puts,
// and leaves no bucket behind; a missing engine bucket is named.
func TestRawStore(t *testing.T) {
	srv := natstest.Start(t)
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: "LIKE", History: 1, Storage: js.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.CreateObjectStore(ctx, js.ObjectStoreConfig{Bucket: "LIKE", Storage: js.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ service, workload, raw, against string }{
		{protocol.KeyValue, WorkloadSet, RawKVWorkload, "direct KV put"},
		{protocol.ObjectStorage, WorkloadPut, RawObjectWorkload, "direct object put"},
	} {
		cfg := testConfig(100)
		cfg.Service, cfg.Workload = tc.service, tc.workload
		if !StoreWrites(cfg) {
			t.Fatalf("StoreWrites(%s %s) = false", tc.service, tc.workload)
		}
		rep, err := RawStore(ctx, j, cfg, "LIKE")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Ops != 100 || rep.Errors != 0 || rep.Config.Service != RawStoreService || rep.Config.Workload != tc.raw {
			t.Fatalf("%s: ops %d errors %v config %+v; want 100 direct puts", tc.service, rep.Ops, rep.ErrorsByCode, rep.Config)
		}
		if c := Compare(rep, rep); c.Against != tc.against {
			t.Errorf("comparison against %q, want %q", c.Against, tc.against)
		}
	}
	names := j.StreamNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, "KV_ABI_BENCH_") || strings.HasPrefix(name, "OBJ_ABI_BENCH_") {
			t.Errorf("scratch bucket %s left after the run", name)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(1)
	cfg.Workload = WorkloadSet
	if _, err := RawStore(ctx, j, cfg, "NOPE"); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("RawStore like a missing bucket = %v, want an error naming it", err)
	}
}
