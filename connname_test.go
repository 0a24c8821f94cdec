package engine_test

import (
	"os"
	"slices"
	"testing"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// TestConnectionNamesAreThePythonEngines: the broker's connz shows a serving engine's
// connections under the names the Python engine gives its own, so an operator reading
// one account's connections sees the same roles whichever engine serves.
func TestConnectionNamesAreThePythonEngines(t *testing.T) {
	srv := natstest.Start(t)
	e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	load(t, e)
	if e.State() != engine.StateServing {
		t.Fatalf("state %s", e.State())
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	cz, err := srv.Raw().Connz(&server.ConnzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cz.Conns {
		names = append(names, c.Name)
	}
	for _, want := range []string{"abi-engine@" + host, "abi-engine-ownership@" + host} {
		if !slices.Contains(names, want) {
			t.Errorf("no connection named %q; the broker shows %q", want, names)
		}
	}
}
