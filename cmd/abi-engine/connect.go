package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/natsauth"
	"github.com/abi-engine/engine/internal/redact"
	"github.com/nats-io/nats.go"
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
	// Login names the way of logging in and where it was given, never a secret, for
	// the error of a broker that refuses it.
	Login string
}

// settingsFor are the settings of a command that reaches the broker at url with the
// login and TLS of cfg (an engine's own, as run read it); an unreadable login file is a
// usage error naming its key.
func settingsFor(cfg *config.Config, url string) (brokerSettings, error) {
	auth, err := natsauth.Options(cfg.NATS)
	if err != nil {
		return brokerSettings{}, usageError(err)
	}
	l := login{from: "the configuration", creds: cfg.NATS.Credentials, nkey: cfg.NATS.NKeySeedFile, tokenFile: cfg.NATS.TokenFile, user: cfg.NATS.User}
	return brokerSettings{URL: url, Options: auth, Timeout: cfg.NATS.ClientTimeout(), JWTSecretFile: cfg.NATS.JWTSecretFile,
		Domain: cfg.NATS.JetStream.Domain, Login: l.describe()}, nil
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
		err = fmt.Errorf("connect to NATS at %s: %w", redact.String(b.URL), err)
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
			err = fmt.Errorf("%w: the broker refused the login, %s", err, b.Login)
		}
		return nil, runtimeError(err)
	}
	return nc, nil
}
