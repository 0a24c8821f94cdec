package node

import (
	"context"
	"sync/atomic"

	"github.com/abi-engine/engine/primaries"
	"github.com/abi-engine/engine/sessions"
)

// Service is an embedder's service as the root package checked it: its primary's
// service and its transfer handlers are made with the epoch it serves under, which
// its calls read (the root package's CallEpoch).
type Service struct {
	Name  string
	Fence primaries.EpochFence // nil: the service has none of its own
	// Primary is the service its primary serves; Transfers its transfer handlers, nil
	// when it has none.
	Primary   func(epoch func() uint64) primaries.Service
	Transfers func(epoch func() uint64) map[string]sessions.Handler
}

// servedEpoch is the Fence the engine gives an embedder's primary: it adopts the epoch
// in the service's own Fence, if it has one, and remembers it for its calls (CallEpoch).
type servedEpoch struct {
	fence primaries.EpochFence
	epoch atomic.Uint64
}

// AdoptEpoch implements primaries.EpochFence.
func (f *servedEpoch) AdoptEpoch(ctx context.Context, epoch uint64) error {
	if f.fence != nil {
		if err := f.fence.AdoptEpoch(ctx, epoch); err != nil {
			return err
		}
	}
	f.epoch.Store(epoch)
	return nil
}
