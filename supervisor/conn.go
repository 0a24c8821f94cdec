package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// ConnConfig describes one NATS connection of the engine.
type ConnConfig struct {
	URL         string // comma-separated list
	Name        string // shown by the server, e.g. "abi-engine lease <instance>"
	Credentials string // .creds file, optional
	Timeout     time.Duration
}

// Dial connects to NATS. The connection reconnects forever: a broker that goes away is
// the lease's business (it fences), not a reason to give up. It waits for the first
// connection until ctx ends.
func Dial(ctx context.Context, cfg ConnConfig, log *zap.Logger) (*nats.Conn, error) {
	log = log.With(zap.String("connection", cfg.Name))
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected", zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", nc.ConnectedUrlRedacted()))
		}),
	}
	if cfg.Timeout > 0 {
		opts = append(opts, nats.Timeout(cfg.Timeout))
	}
	if cfg.Credentials != "" {
		opts = append(opts, nats.UserCredentials(cfg.Credentials))
	}
	for {
		nc, err := nats.Connect(cfg.URL, opts...)
		if err == nil {
			return nc, nil
		}
		log.Warn("cannot connect to nats; retrying", zap.String("url", cfg.URL), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("supervisor: connect to %s: %w (last error: %v)", cfg.URL, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
