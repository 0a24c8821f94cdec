package supervisor

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signals turns SIGTERM, SIGINT and SIGHUP into the engine's handover: the first calls
// OnFirst, the second OnSecond (stop at once). SIGHUP is a stop request like the others
// (a closed terminal, a supervisor that hangs up): left to Go's default it kills the
// process without releasing the lease, and a successor waits a whole lease period. It
// is a suture service.
type Signals struct {
	OnFirst  func()
	OnSecond func()
}

func (s *Signals) String() string { return "signals" }

// Serve implements suture.Service.
func (s *Signals) Serve(ctx context.Context) error {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(ch)
	seen := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
			seen++
			switch seen {
			case 1:
				if s.OnFirst != nil {
					s.OnFirst()
				}
			default:
				if s.OnSecond != nil {
					s.OnSecond()
				}
			}
		}
	}
}
