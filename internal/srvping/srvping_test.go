package srvping

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/internal/natstest"
)

// TestPing: the broker's no-responders status ends the wait for a service nobody
// serves at once (a window this long would otherwise be waited out), and each instance
// that answers is listed with the instance id of its metadata, "" when it carries none.
func TestPing(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	long := Window{Stall: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := Ping(ctx, nc, []string{"keyvalue", "object_storage"}, long); err != nil || len(got) != 0 {
		t.Fatalf("nobody serves: %v %v", got, err)
	}
	for _, meta := range []map[string]string{{InstanceKey: "a"}, nil} {
		sc := natstest.Connect(t, srv.URL())
		svc, err := micro.AddService(sc, micro.Config{Name: "keyvalue", Version: "1.0.0", Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		// Its subscriptions are at the broker before anyone asks.
		if err := sc.Flush(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Stop() })
	}
	got, err := Ping(ctx, nc, []string{"keyvalue", "object_storage"}, Window{Stall: 200 * time.Millisecond, Max: 5 * time.Second})
	if err != nil || len(got) != 2 {
		t.Fatalf("two instances serve keyvalue: %+v %v", got, err)
	}
	ids := map[string]bool{}
	for _, a := range got {
		if a.Service != "keyvalue" || a.Version != "1.0.0" || a.ID == "" {
			t.Errorf("answer %+v", a)
		}
		ids[a.Instance] = true
	}
	if !ids["a"] || !ids[""] {
		t.Errorf("instances %v, want a and one without", ids)
	}
}
