package supervisor

import (
	"time"

	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// NewTree is a suture supervisor whose events go to log. A service that fails keeps
// being restarted with suture's decaying backoff; stopping waits up to stopTimeout for
// each service.
func NewTree(name string, log *zap.Logger, stopTimeout time.Duration) *suture.Supervisor {
	return suture.New(name, suture.Spec{
		EventHook: func(e suture.Event) {
			log.Warn("supervisor: "+e.String(), zap.Any("details", e.Map()))
		},
		Timeout: stopTimeout,
	})
}
