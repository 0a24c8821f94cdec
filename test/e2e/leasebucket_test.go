package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/lease"
	"github.com/nats-io/nats.go/jetstream"
)

// TestLeaseBucketWithWrongSettingsIsRefused is issue 9 item 2: a lease bucket created
// beforehand with a TTL, history 5 and memory storage would let the key vanish by
// itself; the engine refuses it, naming the bucket and each wrong setting in one error,
// and exits 1 without ever writing the lease.
func TestLeaseBucketWithWrongSettingsIsRefused(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: "ABI_ENGINE", TTL: 30 * time.Second, History: 5, Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, "A", engineConfig{NATSURL: srv.URL()})
	if code := p.exitCode(20 * time.Second); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	out := p.out.String()
	for _, want := range []string{"lease bucket ABI_ENGINE", "history is 5 (want 1)", "storage is memory (want file)", "ttl (max age) is 30s (want none)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Count(out, "has settings the engine cannot rely on") != 1 {
		t.Errorf("want one error naming every wrong setting:\n%s", out)
	}
	if _, err := kv.Get(ctx, "owner"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the refused engine wrote the lease: %v", err)
	}
}

// leaseHolder reads the lease key, "" when the bucket or the key is missing.
func leaseHolder(ctx context.Context, js jetstream.JetStream) string {
	kv, err := js.KeyValue(ctx, "ABI_ENGINE")
	if err != nil {
		return ""
	}
	e, err := kv.Get(ctx, "owner")
	if err != nil {
		return ""
	}
	return lease.DecodeHolder(e.Value()).InstanceID
}

// TestDeletedLeaseBucketIsRecreated is issue 9 item 10: with the lease bucket deleted
// under a serving engine, the engine recreates it with the configured settings, takes
// the lease again, and serves again without a restart.
func TestDeletedLeaseBucketIsRecreated(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	id := a.instanceID()
	ctx := ctxFor(t, 60*time.Second)
	if err := js.DeleteKeyValue(ctx, "ABI_ENGINE"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for leaseHolder(ctx, js) != id {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not recreate the lease bucket and take the lease again within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := js.Stream(ctx, "KV_ABI_ENGINE")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.MaxMsgsPerSubject != 1 || c.Storage != jetstream.FileStorage || c.MaxAge != 0 || c.Replicas != 1 || c.AllowMsgTTL {
		t.Fatalf("recreated with %+v", c)
	}
	a.waitState("serving", 10*time.Second)
	a.waitHTTP("/healthz", 200, time.Second)
	tf := startTraffic(t, srv.URL(), 2)
	tf.waitAnswers(t, id, 50, 20*time.Second)
	tf.halt()
	if len(tf.fails) > 0 || len(tf.bad) > 0 {
		t.Fatalf("after the recreation: %d failed, %d wrong reads; first: %v %v", len(tf.fails), len(tf.bad), tf.fails, tf.bad)
	}
	a.waitLog("recreated it", time.Second)
}

// TestFencedEngineThatCannotRecoverFailsLiveness is issue 9 item 10's other half: an
// engine fenced for longer than a lease period without renewing again answers /healthz
// 503, so a liveness probe restarts it. Here the lease bucket is deleted and another
// stream takes its subjects, so the broker refuses to recreate it.
func TestFencedEngineThatCannotRecoverFailsLiveness(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	a.waitHTTP("/healthz", 200, time.Second)
	ctx := ctxFor(t, 60*time.Second)
	deleted := time.Now()
	if err := js.DeleteKeyValue(ctx, "ABI_ENGINE"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUATTER", Subjects: []string{"$KV.ABI_ENGINE.>"}}); err != nil {
		t.Fatal(err)
	}
	a.waitState("fenced", 10*time.Second)
	body := a.waitHTTP("/healthz", 503, 20*time.Second)
	// The last renewal was sent at most lease/4 before the deletion; the engine fenced
	// lease/2 after it and is unhealthy a lease (2 s) after that: 2.5 s at the least.
	if took := time.Since(deleted); took < 2*time.Second {
		t.Errorf("/healthz failed %s after the deletion, before the engine was fenced for a lease period", took)
	}
	if !strings.Contains(body, "fenced") {
		t.Errorf("/healthz body %q does not say why", body)
	}
	a.waitLog("recreate", time.Second)
}
