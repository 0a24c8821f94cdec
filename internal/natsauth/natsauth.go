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
	"github.com/nats-io/nkeys"

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

// Login is the one login of the configuration as the embedded broker takes it: the
// token, user and password, or public nkey the engine itself connects with. The zero
// value (no login, or a .creds file, which needs an operator the embedded broker does
// not have) requires none.
type Login struct {
	Token, User, Password, NKey string
}

// LoginOf reads n's login files for the embedded broker; an error names the key.
func LoginOf(n config.NATS) (Login, error) {
	var l Login
	var err error
	switch {
	case n.TokenFile != "":
		l.Token, err = config.ReadSecret(n.TokenFile)
		if err != nil {
			return l, fmt.Errorf("nats.token_file %s: %w", n.TokenFile, err)
		}
	case n.User != "":
		l.User = n.User
		l.Password, err = config.ReadSecret(n.PasswordFile)
		if err != nil {
			return l, fmt.Errorf("nats.password_file %s: %w", n.PasswordFile, err)
		}
	case n.NKeySeedFile != "":
		seed, err := config.ReadSecret(n.NKeySeedFile)
		if err != nil {
			return l, fmt.Errorf("nats.nkey_seed_file %s: %w", n.NKeySeedFile, err)
		}
		kp, err := nkeys.FromSeed([]byte(seed))
		if err != nil {
			return l, fmt.Errorf("nats.nkey_seed_file %s: not an nkey seed", n.NKeySeedFile)
		}
		defer kp.Wipe()
		if l.NKey, err = kp.PublicKey(); err != nil {
			return l, fmt.Errorf("nats.nkey_seed_file %s: %w", n.NKeySeedFile, err)
		}
	}
	return l, nil
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
