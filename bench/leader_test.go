package bench

import (
	"context"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/natstest"
)

// On a cluster, a scratch bucket ends up led by the server that leads the bucket it is
// shaped like, whichever server the cluster placed its leader on first.
func TestScratchBucketIsLedLikeTheEnginesBucket(t *testing.T) {
	c := natstest.StartCluster(t)
	j, err := js.New(natstest.Connect(t, c.Nodes[0].URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: "LIKE", History: 1, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	want, err := leaderOf(ctx, j, "KV_LIKE", "")
	if err != nil {
		t.Fatal(err)
	}
	// Scratch buckets the cluster placed as it chose, each then led from another
	// server than LIKE's.
	for i := range 2 {
		scratch := "SCRATCH" + string(rune('A'+i))
		if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: scratch, History: 1, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		before := c.Nodes[(i+1)%3].Name()
		if before == want {
			before = c.Nodes[(i+2)%3].Name()
		}
		if err := moveLeader(ctx, j, "KV_"+scratch, before); err != nil {
			t.Fatal(err)
		}
		if err := leadLike(ctx, j, "KV_LIKE", "KV_"+scratch); err != nil {
			t.Fatal(err)
		}
		if got, err := leaderOf(ctx, j, "KV_"+scratch, ""); err != nil || got != want {
			t.Fatalf("%s is led by %s (%v), want %s like KV_LIKE (it was led by %s)", scratch, got, err, want, before)
		}
	}
	// A bucket of one replica has no leader to move.
	if _, err := j.CreateKeyValue(ctx, js.KeyValueConfig{Bucket: "ONE", History: 1}); err != nil {
		t.Fatal(err)
	}
	if err := leadLike(ctx, j, "KV_ONE", "KV_SCRATCHA"); err != nil {
		t.Errorf("like a bucket of one replica: %v, want nothing to do", err)
	}
}
