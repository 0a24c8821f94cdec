package engine_test

import (
	"testing"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/objtest"
)

// The SDK's typed clients pass the same contract suites as the engine's backends when
// pointed at an engine serving those backends: a client-role engine can hand them to
// its modules unchanged. Each case gets an engine of its own, so each starts empty.
func TestTypedClientsPassTheBackendContracts(t *testing.T) {
	serve := func(t *testing.T, srv *natstest.Server) *client.Transport {
		e := newEngine(t, cfg(t, srv.URL(), "serve", "", "memory"))
		load(t, e)
		return transport(t, srv.URL())
	}
	t.Run("keyvalue", func(t *testing.T) {
		// keyvalue values travel in one message: the broker's default 1 MiB.
		srv := natstest.Start(t)
		kvtest.Run(t, func(t *testing.T) keyvalue.Store { return client.NewKeyValue(serve(t, srv)) })
	})
	t.Run("object_storage", func(t *testing.T) {
		// Objects larger than the broker's 64 KiB max payload go through transfers.
		srv := natstest.Start(t, natstest.WithMaxPayload(64*1024))
		objtest.Run(t, func(t *testing.T) objectstorage.Store { return client.NewObjectStorage(serve(t, srv)) },
			objtest.WithMaxObjectBytes(256*1024))
	})
}
