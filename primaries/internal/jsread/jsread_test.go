package jsread

import (
	"context"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLeaderOnlyTurnsDirectGetsOff(t *testing.T) {
	srv := natstest.Start(t)
	j, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := j.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "B"}); err != nil {
		t.Fatal(err)
	}
	direct := func() bool {
		st, err := j.Stream(ctx, "KV_B")
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.AllowDirect
	}
	if !direct() {
		t.Fatal("a new bucket has direct gets off already; the test proves nothing")
	}
	for range 2 { // the second call finds it done
		if err := LeaderOnly(ctx, j, "KV_B"); err != nil {
			t.Fatal(err)
		}
		if direct() {
			t.Fatal("direct gets still on")
		}
	}
	if err := LeaderOnly(ctx, j, "KV_MISSING"); err == nil {
		t.Fatal("no error for a missing stream")
	}
}
