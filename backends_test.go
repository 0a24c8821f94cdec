package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
)

// TestServiceReplicasReachTheirBuckets is issue 10 item 11: each jetstream service
// creates its bucket with its own replicas, not the lease's. A single server refuses
// more than one replica, so a service asking for 3 fails to load, naming it, while the
// lease (1 replica) is fine.
func TestServiceReplicasReachTheirBuckets(t *testing.T) {
	for _, service := range []string{"keyvalue", "object_storage"} {
		t.Run(service, func(t *testing.T) {
			srv := natstest.Start(t)
			c := cfg(t, srv.URL(), "serve", "", "jetstream")
			if service == "keyvalue" {
				c.Services.KeyValue.Replicas = 3
			} else {
				c.Services.ObjectStorage.Replicas = 3
			}
			e, err := engine.New(c)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = e.Load(ctx)
			if err == nil {
				_ = e.Shutdown(ctx)
				t.Fatal("Load succeeded: the service's bucket did not get its own replicas")
			}
			if !strings.Contains(err.Error(), "services."+service) || !strings.Contains(err.Error(), "replicas") {
				t.Fatalf("Load = %v, want the service's bucket refused for its replicas", err)
			}
		})
	}
}
