package main

import (
	"fmt"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natsauth"
	"github.com/abi-engine/engine/internal/redact"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// brokerSettings are what a client command needs to reach the broker.
type brokerSettings struct {
	URL     string
	Options []nats.Option // the login and TLS of the configuration (internal/natsauth)
	Timeout time.Duration // nats.client_timeout_seconds
	// JWTSecretFile is nats.jwt_secret_file: the secret the service tokens of call are
	// signed with, "" for none.
	JWTSecretFile string
	Domain        string // nats.jetstream.domain: where the lease bucket is
}

// brokerFor finds the broker of status and call: --nats, else ABI_NATS_URL, else
// nats.url of abi-engine.yaml in the working directory, else the embedded broker's
// address. The configuration is read as a client's, so a serving engine's
// shared-backend check cannot refuse a command that only reads.
func (c *cli) brokerFor(cmd *cobra.Command, natsFlag string) (brokerSettings, error) {
	overrides := []config.Override{config.RoleFlag(string(config.RoleClient))}
	if cmd.Flags().Changed("nats") {
		overrides = append(overrides, config.NATSURLFlag(natsFlag))
	}
	cfg, err := config.Load("", c.env, overrides...)
	if err != nil {
		return brokerSettings{}, usageError(err)
	}
	url := cfg.NATS.URL
	if url == "" {
		if url, err = embeddedURL(cfg.NATS.Embedded.Listen); err != nil {
			return brokerSettings{}, usageError(err)
		}
	}
	return settingsFor(cfg, url)
}

// settingsFor are the settings of a command that reaches the broker at url with the
// login and TLS of cfg; an unreadable login file is a usage error naming its key.
func settingsFor(cfg *config.Config, url string) (brokerSettings, error) {
	auth, err := natsauth.Options(cfg.NATS)
	if err != nil {
		return brokerSettings{}, usageError(err)
	}
	return brokerSettings{URL: url, Options: auth, Timeout: cfg.NATS.ClientTimeout(), JWTSecretFile: cfg.NATS.JWTSecretFile, Domain: cfg.NATS.JetStream.Domain}, nil
}

// embeddedURL is where an engine with an embedded broker listening on listen is reached
// from this host.
func embeddedURL(listen string) (string, error) {
	url, err := config.NATS{Embedded: config.Embedded{Listen: listen}}.EmbeddedURL()
	if err != nil {
		return "", fmt.Errorf("%w; or give the broker's address with --nats", err)
	}
	return url, nil
}

// connect dials the broker once: a command reports a broker it cannot reach rather
// than waiting for it.
func connect(b brokerSettings, name string) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.Timeout(b.Timeout), nats.NoReconnect()}, b.Options...)
	nc, err := nats.Connect(b.URL, opts...)
	if err != nil {
		// An unparsable URL comes back in its error as it was given: main redacts it.
		return nil, runtimeError(fmt.Errorf("connect to NATS at %s: %w", redact.String(b.URL), err))
	}
	return nc, nil
}
