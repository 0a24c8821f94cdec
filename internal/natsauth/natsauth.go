// Package natsauth turns the transport-security keys of the configuration (nats.tls,
// nats.credentials, nats.nkey_seed_file, nats.token_file, nats.user with
// nats.password_file) into nats.go options, for every connection the engine and the
// CLI make. Secrets stay in their files: a certificate, a token or a password is read
// again at each (re)connect, so a rotated Kubernetes Secret takes effect without a
// restart, and none is ever printed. An error names the key whose file failed.
package natsauth

import (
	"crypto/tls"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/config"
)

// Options are the nats.go options of n's login and TLS; nil when none is set. A file
// that cannot be read now is an error naming its key; one that goes missing later
// keeps the secret last read.
func Options(n config.NATS) ([]nats.Option, error) {
	var opts []nats.Option
	t := n.TLS
	if t.InsecureSkipVerify {
		// First: Secure replaces the TLS configuration the others add to.
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true})) //nolint:gosec // asked for by name
	}
	if t.CAFile != "" {
		opts = append(opts, nats.RootCAs(t.CAFile))
	}
	if t.CertFile != "" {
		opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
	}
	if n.Credentials != "" {
		opts = append(opts, nats.UserCredentials(n.Credentials))
	}
	if n.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(n.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats.nkey_seed_file %s: %w", n.NKeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if n.TokenFile != "" {
		tok, err := secret("nats.token_file", n.TokenFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.TokenHandler(tok))
	}
	if n.User != "" {
		pw, err := secret("nats.password_file", n.PasswordFile)
		if err != nil {
			return nil, err
		}
		user := n.User
		opts = append(opts, nats.UserInfoHandler(func() (string, string) { return user, pw() }))
	}
	return opts, nil
}

// secret reads the file at path now, and returns what reads it again at each connect,
// keeping the last good value when the file cannot be read.
func secret(key, path string) (func() string, error) {
	v, err := config.ReadSecret(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", key, path, err)
	}
	var mu sync.Mutex
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		if fresh, err := config.ReadSecret(path); err == nil {
			v = fresh
		}
		return v
	}, nil
}
