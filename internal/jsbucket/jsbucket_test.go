package jsbucket_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ensureUntil runs Ensure until done accepts its outcome: a bucket found gone is
// recreated only after Settle, so the first answers are ErrSettling.
func ensureUntil(t *testing.T, ctx context.Context, b *jsbucket.Bucket, done func(bool, error) bool) (bool, error) {
	t.Helper()
	deadline := time.Now().Add(10 * jsbucket.Settle)
	for {
		recreated, err := b.Ensure(ctx)
		if done(recreated, err) {
			return recreated, err
		}
		if !errors.Is(err, jsbucket.ErrSettling) || time.Now().After(deadline) {
			t.Fatalf("Ensure = %v %v", recreated, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func kvSpec(name string) jsbucket.Spec {
	return jsbucket.Spec{
		What:     "test bucket",
		KeyValue: &jetstream.KeyValueConfig{Bucket: name, History: 1},
		Require:  []jsbucket.Setting{jsbucket.History(1), jsbucket.FileStorage(), jsbucket.NoMaxAge(), jsbucket.NoPerKeyTTL(), jsbucket.Replicas(1)},
	}
}

func TestOpenCreatesThenBinds(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	prepared := 0
	spec := kvSpec("B")
	spec.Prepare = func(_ context.Context, _ jetstream.JetStream, stream string) error {
		if stream != "KV_B" {
			t.Errorf("Prepare on %s", stream)
		}
		prepared++
		return nil
	}
	b, err := jsbucket.Open(ctx, js, spec)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "B" || b.Stream() != "KV_B" {
		t.Fatalf("bucket %s stream %s", b.Name(), b.Stream())
	}
	if _, err := jsbucket.Open(ctx, js, spec); err != nil {
		t.Fatalf("binding the existing bucket: %v", err)
	}
	if prepared != 2 {
		t.Fatalf("Prepare ran %d times, want once per Open", prepared)
	}
}

func TestOpenRefusesEveryWrongSettingAtOnce(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: "B", History: 5, TTL: time.Minute, Storage: jetstream.MemoryStorage, LimitMarkerTTL: time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	_, err = jsbucket.Open(ctx, js, kvSpec("B"))
	var shape *jsbucket.ShapeError
	if !errors.As(err, &shape) {
		t.Fatalf("Open = %v, want a *ShapeError", err)
	}
	want := []jsbucket.Mismatch{
		{Setting: "history", Want: "1", Got: "5"},
		{Setting: "storage", Want: "file", Got: "memory"},
		{Setting: "ttl (max age)", Want: "none", Got: "1m0s"},
		{Setting: "per-key ttl", Want: "off", Got: "on"},
	}
	if len(shape.Wrong) != len(want) {
		t.Fatalf("wrong settings %v, want %v", shape.Wrong, want)
	}
	for i, m := range want {
		if shape.Wrong[i] != m {
			t.Errorf("wrong setting %d = %v, want %v", i, shape.Wrong[i], m)
		}
	}
	for _, s := range []string{"test bucket B", "KV_B", "history is 5 (want 1)", "storage is memory (want file)", "ttl (max age) is 1m0s (want none)", "per-key ttl is on (want off)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
}

func TestEnsureRecreatesADeletedBucket(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	prepared := 0
	spec := jsbucket.Spec{
		What:    "objects",
		Object:  &jetstream.ObjectStoreConfig{Bucket: "O", Description: "mine"},
		Require: []jsbucket.Setting{jsbucket.FileStorage()},
		Prepare: func(context.Context, jetstream.JetStream, string) error { prepared++; return nil },
	}
	b, err := jsbucket.Open(ctx, js, spec)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, "O")
	if err != nil {
		t.Fatal(err)
	}
	if recreated, err := b.Ensure(ctx); recreated || err != nil {
		t.Fatalf("Ensure on a bucket that exists = %v %v", recreated, err)
	}
	if err := js.DeleteObjectStore(ctx, "O"); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "a", []byte("x")); err == nil {
		t.Fatal("a put into a deleted bucket succeeded")
	}
	found := time.Now()
	if recreated, err := b.Ensure(ctx); recreated || !errors.Is(err, jsbucket.ErrSettling) {
		t.Fatalf("first Ensure on a deleted bucket = %v %v, want ErrSettling", recreated, err)
	}
	ensureUntil(t, ctx, b, func(recreated bool, err error) bool { return recreated && err == nil })
	if took := time.Since(found); took < jsbucket.Settle {
		t.Fatalf("recreated %s after it was found gone, before the settle time", took)
	}
	if prepared != 2 {
		t.Fatalf("Prepare ran %d times, want at Open and at the recreation", prepared)
	}
	st, err := js.Stream(ctx, "OBJ_O")
	if err != nil {
		t.Fatal(err)
	}
	if d := st.CachedInfo().Config.Description; d != "mine" {
		t.Fatalf("recreated with description %q, not the configured one", d)
	}
	// The handle bound before the deletion works on the new bucket.
	if _, err := obs.PutBytes(ctx, "a", []byte("x")); err != nil {
		t.Fatalf("put through the old handle: %v", err)
	}
}

func TestEnsureRefusesABucketRecreatedWithWrongSettings(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	b, err := jsbucket.Open(ctx, js, kvSpec("B"))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B", History: 3}); err != nil {
		t.Fatal(err)
	}
	var shape *jsbucket.ShapeError
	if recreated, err := b.Ensure(ctx); recreated || !errors.As(err, &shape) {
		t.Fatalf("Ensure = %v %v, want a *ShapeError", recreated, err)
	}
}

func TestEnsureFailsWhenTheBrokerRefusesTheRecreation(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	b, err := jsbucket.Open(ctx, js, kvSpec("B"))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, "B"); err != nil {
		t.Fatal(err)
	}
	// Another stream now holds the bucket's subjects: the server refuses a bucket
	// whose subjects overlap.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUATTER", Subjects: []string{"$KV.B.>"}}); err != nil {
		t.Fatal(err)
	}
	ensureUntil(t, ctx, b, func(recreated bool, err error) bool {
		return !recreated && err != nil && strings.Contains(err.Error(), "test bucket B: recreate")
	})
}

func TestEnsureAsksNothingWhileDisconnected(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	b, err := jsbucket.Open(ctx, js, kvSpec("B"))
	if err != nil {
		t.Fatal(err)
	}
	away := nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED)
	srv.Stop()
	select {
	case <-away:
	case <-ctx.Done():
		t.Fatal("the client never noticed the broker was gone")
	}
	if recreated, err := b.Ensure(ctx); recreated || err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("Ensure while disconnected = %v %v", recreated, err)
	}
}

func atomicOn(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) bool {
	t.Helper()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().Config.AllowAtomicPublish
}

// A Stream setting is set on a bucket Open creates, on an existing bucket that lacks it
// (a bucket an older engine created), on a recreated bucket, and given back to a
// running bucket that lost it.
func TestStreamSettings(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	spec := kvSpec("S")
	spec.Stream = []jsbucket.StreamSetting{jsbucket.AtomicPublish()}

	created, err := jsbucket.Open(ctx, js, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !atomicOn(t, ctx, js, "KV_S") {
		t.Fatal("a bucket Open created has no atomic publish")
	}

	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "OLD", History: 1}); err != nil {
		t.Fatal(err)
	}
	old := spec
	old.KeyValue = &jetstream.KeyValueConfig{Bucket: "OLD", History: 1}
	if _, err := jsbucket.Open(ctx, js, old); err != nil {
		t.Fatal(err)
	}
	if !atomicOn(t, ctx, js, "KV_OLD") {
		t.Fatal("an existing bucket Open bound has no atomic publish")
	}

	// Taken away while the engine runs: the next Ensure gives it back.
	st, err := js.Stream(ctx, "KV_S")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if recreated, err := created.Ensure(ctx); recreated || err != nil {
		t.Fatalf("Ensure = %v %v", recreated, err)
	}
	if !atomicOn(t, ctx, js, "KV_S") {
		t.Fatal("Ensure did not give the bucket its atomic publish back")
	}

	if err := js.DeleteKeyValue(ctx, "S"); err != nil {
		t.Fatal(err)
	}
	ensureUntil(t, ctx, created, func(recreated bool, err error) bool { return recreated && err == nil })
	if !atomicOn(t, ctx, js, "KV_S") {
		t.Fatal("the recreated bucket has no atomic publish")
	}
}
