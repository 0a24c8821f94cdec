package storeproof

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/abi-engine/engine/protocol"
)

// adopted is an epoch fence that adopts every epoch, or refuses with err.
type adopted struct{ err error }

func (a adopted) AdoptEpoch(context.Context, uint64) error { return a.err }

// jetStreamKV is a configuration whose keyvalue backend is the JetStream bucket named.
func jetStreamKV(bucket string) *config.Config {
	cfg := config.Default()
	cfg.Services.KeyValue.Adapter = config.KeyValueJetStream
	cfg.Services.KeyValue.Bucket = bucket
	return cfg
}

// TestAStandbyOnAnotherBucketIsRefused: the holder's adoption of its epoch publishes
// the id of its keyvalue store in the lease bucket (a real one); a standby whose
// backend reaches another bucket is refused naming both, one that reaches the same
// bucket is not, an adoption that fails publishes nothing, and a proof published by
// another engine than the holder is not held against the standby.
func TestAStandbyOnAnotherBucketIsRefused(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := jetstreamstore.Open(ctx, nc, jetstreamstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	log := zap.NewNop()
	holder := lease.Holder{InstanceID: "0123456789abcdef0123456789abcdef"}
	ours := jetStreamKV("KV_A")
	if err := WithProof(adopted{errors.New("refused")}, protocol.KeyValue, holder.InstanceID,
		Identities(ours, nil)[protocol.KeyValue], store, log).AdoptEpoch(ctx, 1); err == nil {
		t.Fatal("a refused adoption was not refused")
	}
	other := jetStreamKV("KV_B")
	if m, err := Prove(ctx, store, holder, Identities(other, nil), other, log); err != nil || m != nil {
		t.Fatalf("Prove before anything was published = %v, %v; want nil, nil", m, err)
	}
	fence := WithProof(adopted{}, protocol.KeyValue, holder.InstanceID, Identities(ours, nil)[protocol.KeyValue], store, log)
	if err := fence.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	m, err := Prove(ctx, store, holder, Identities(other, nil), other, log)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil || m.Service != protocol.KeyValue || m.Theirs.ID != "bucket KV_A" || m.Ours.ID != "bucket KV_B" || m.Holder != holder {
		t.Fatalf("Prove on another bucket = %+v, want a mismatch of keyvalue's buckets KV_A (theirs) and KV_B (ours)", m)
	}
	if m, err := Prove(ctx, store, holder, Identities(jetStreamKV("KV_A"), nil), jetStreamKV("KV_A"), log); err != nil || m != nil {
		t.Fatalf("Prove on the same bucket = %+v, %v; want nil, nil", m, err)
	}
	someoneElse := lease.Holder{InstanceID: "fedcba9876543210fedcba9876543210"}
	if m, err := Prove(ctx, store, someoneElse, Identities(other, nil), other, log); err != nil || m != nil {
		t.Fatalf("Prove against a holder that published nothing = %+v, %v; want nil, nil", m, err)
	}
}
