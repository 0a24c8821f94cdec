package engine_test

import (
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
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

// TestAnAutoClientHoldsOnlyItsClientConnection: an auto engine dials its lease and
// service connections before its claim; refused by the serving engine's lease, it is a
// client whose one connection at the broker is its client connection, so connz shows
// one engine serving, not two.
func TestAnAutoClientHoldsOnlyItsClientConnection(t *testing.T) {
	srv := natstest.Start(t)
	a := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
	load(t, a)
	c := newEngine(t, cfg(t, srv.URL(), "auto", "v9", "memory"))
	load(t, c)
	if c.State() != engine.StateClient {
		t.Fatalf("auto next to a serving engine: state %s", c.State())
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"abi-engine@" + host: 1, "abi-engine-ownership@" + host: 1, "abi-engine-client@" + host: 1}
	var names map[string]int
	defer func() {
		if t.Failed() {
			t.Logf("connz shows %v, want %v", names, want)
		}
	}()
	// The broker drops a closed connection from connz once it has read its end.
	testwait.For(t, 10*time.Second, "the auto client's lease and service connections gone from connz", func() bool {
		cz, err := srv.Raw().Connz(&server.ConnzOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names = map[string]int{}
		for _, conn := range cz.Conns {
			names[conn.Name]++
		}
		return maps.Equal(names, want)
	})
}
