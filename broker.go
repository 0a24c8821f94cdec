package engine

import (
	"context"
	"fmt"
	"os"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natsauth"
	"github.com/abi-engine/engine/supervisor"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// This file is how an engine finds its broker and connects to it.

// brokerURL is the broker the engine uses: nats.url when it is set. With nats.url
// empty, a serving engine starts the embedded broker; a client and an auto engine first
// look for a NATS server at nats.embedded.listen (where the embedded broker of a
// serving engine on this host listens) and use it. Finding none, an auto engine starts
// the embedded broker and serves, and a client fails naming the address (loadClient):
// a client never keeps data on this host.
func (e *Engine) brokerURL(ctx context.Context) (string, error) {
	n := e.cfg.NATS
	if !n.EmbeddedBroker() {
		return n.URL, nil
	}
	switch n.Engine.Role {
	case config.RoleClient:
		url, err := n.EmbeddedURL()
		if err != nil {
			return "", fmt.Errorf("engine: a client engine starts no broker: %w", err)
		}
		return e.useBroker(url), nil
	case config.RoleAuto:
		url, err := n.EmbeddedURL()
		if err != nil {
			break // port 0: nowhere to look; this engine hosts the broker
		}
		cc, err := e.connConfig(url, "probe")
		if err != nil {
			return "", err
		}
		found, err := supervisor.Probe(ctx, cc)
		if err != nil {
			return "", fmt.Errorf("engine: nats.url is empty, so this auto engine looked for a NATS server at %s (nats.embedded.listen): %w", n.Embedded.Listen, err)
		}
		if found {
			e.log.Info("nats.url is empty and a NATS server answers at nats.embedded.listen: using it", zap.String("url", url))
			return e.useBroker(url), nil
		}
		e.log.Info("nats.url is empty and no NATS server answers at nats.embedded.listen: starting the embedded one", zap.String("url", url))
	}
	login, err := natsauth.LoginOf(n)
	if err != nil {
		return "", fmt.Errorf("engine: embedded broker: %w", err)
	}
	b, err := supervisor.NewBroker(n.Embedded.Listen, n.Embedded.StoreDir, e.log, supervisor.BrokerAuth(login))
	if err != nil {
		return "", fmt.Errorf("engine: %w", err)
	}
	e.tree.add(svcBroker, b)
	url, err := b.URL(ctx)
	if err != nil {
		return "", err
	}
	return e.useBroker(url), nil
}

// useBroker records url as the broker of the engine.
func (e *Engine) useBroker(url string) string {
	e.mu.Lock()
	e.natsURL = url
	e.mu.Unlock()
	return url
}

func (e *Engine) connConfig(url, purpose string) (supervisor.ConnConfig, error) {
	// natsauth adds nats.credentials with the other logins.
	opts, err := natsauth.Options(e.cfg.NATS)
	if err != nil {
		return supervisor.ConnConfig{}, fmt.Errorf("engine: connect to NATS: %w", err)
	}
	return supervisor.ConnConfig{
		URL:            url,
		Name:           connName(purpose),
		Options:        opts,
		OnAsyncError:   e.metrics.asyncError,
		Timeout:        e.cfg.NATS.ClientTimeout(),
		ConnectTimeout: e.cfg.NATS.ConnectTimeout(),
	}, nil
}

// connName is the name a connection shows the broker (connz, server logs), as the
// Python engine names its own (<role>@<host>), so one account's connections read the
// same whichever engine made them: abi-engine@<host> serves the services,
// abi-engine-ownership@<host> holds the lease, and the client and probe connections,
// which the Python engine does not have, follow the same pattern.
func connName(purpose string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	switch purpose {
	case "service":
		return "abi-engine@" + host
	case "lease":
		return "abi-engine-ownership@" + host
	}
	return "abi-engine-" + purpose + "@" + host
}

func (e *Engine) dial(ctx context.Context, url, purpose string) (*nats.Conn, error) {
	cc, err := e.connConfig(url, purpose)
	if err != nil {
		return nil, err
	}
	return supervisor.Dial(ctx, cc, e.log)
}
