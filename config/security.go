package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
)

// This file holds the rules of the transport-security keys (nats.tls, the login
// files) and of the limits block. Validate checks how the keys go together; Check also
// reads the files, so `abi-engine config check` finds a missing certificate before a
// deploy does. A secret's content is never part of an issue: only its file's path.

// checkAuth checks that the login keys go together: at most one way to log in, a user
// with its password file, a client certificate with its key.
func (c *Config) checkAuth(issues []Issue) []Issue {
	n := c.NATS
	q := strconv.Quote
	var ways []string
	for _, w := range []struct{ key, value string }{
		{keyCredentials, n.Credentials}, {keyNKeySeed, n.NKeySeedFile}, {keyTokenFile, n.TokenFile}, {keyUser, n.User},
	} {
		if w.value != "" {
			ways = append(ways, w.key)
		}
	}
	if len(ways) > 1 {
		issues = append(issues, c.issue(ways[1], "", fmt.Sprintf("cannot be set together with %s: set one way to log in (%s)", ways[0], strings.Join(ways, ", "))))
	}
	if n.User != "" && n.PasswordFile == "" {
		issues = append(issues, c.issue(keyPasswordFile, q(""), "is required with nats.user: the file holding the user's password"))
	}
	if n.PasswordFile != "" && n.User == "" {
		issues = append(issues, c.issue(keyUser, q(""), "is required with nats.password_file: the user the password belongs to"))
	}
	t := n.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		key, other := keyTLSKey, keyTLSCert
		if t.CertFile == "" {
			key, other = keyTLSCert, keyTLSKey
		}
		issues = append(issues, c.issue(key, q(""), "is required with "+other+": a client certificate needs its key, and the key its certificate"))
	}
	if t.Enabled() && n.EmbeddedBroker() {
		issues = append(issues, c.issue("nats.tls", "", "is set, but nats.url is empty: the embedded broker listens without TLS; remove nats.tls or set nats.url"))
	}
	return issues
}

// authFileIssues reads every file the login and TLS keys name, as an engine would at
// connect, and reports what would stop it: missing or unreadable, not PEM, a key that
// does not match its certificate, a client certificate expired or not yet valid at
// now, an nkey seed that does not parse, an empty secret.
func (c *Config) authFileIssues(now time.Time) []Issue {
	n := c.NATS
	var issues []Issue
	bad := func(key, path, rule string, err error) {
		issues = append(issues, c.issue(key, strconv.Quote(path), rule+": "+err.Error()))
	}
	if p := n.TLS.CAFile; p != "" {
		if err := readCA(p); err != nil {
			bad(keyTLSCA, p, "must be a PEM file of CA certificates this process can read", err)
		}
	}
	if n.TLS.CertFile != "" && n.TLS.KeyFile != "" {
		certErr, keyErr := readable(n.TLS.CertFile), readable(n.TLS.KeyFile)
		switch {
		case certErr != nil:
			bad(keyTLSCert, n.TLS.CertFile, "must be a PEM client certificate this process can read", certErr)
		case keyErr != nil:
			bad(keyTLSKey, n.TLS.KeyFile, "must be the PEM key of nats.tls.cert_file, readable by this process", keyErr)
		default:
			var expired *ValidityError
			switch err := checkClientCert(n.TLS.CertFile, n.TLS.KeyFile, now); {
			case errors.As(err, &expired):
				bad(keyTLSCert, n.TLS.CertFile, "must be a client certificate valid now", err)
			case err != nil:
				bad(keyTLSCert, n.TLS.CertFile, "with nats.tls.key_file must be a PEM certificate and its key", err)
			}
		}
	}
	if p := n.NKeySeedFile; p != "" {
		if err := checkSeed(p); err != nil {
			bad(keyNKeySeed, p, "must be a file holding a NATS user nkey seed (SU...)", err)
		}
	}
	for _, s := range []struct{ key, path, what string }{
		{keyTokenFile, n.TokenFile, "the token"},
		{keyPasswordFile, n.PasswordFile, "the password of nats.user"},
		{keyJWTSecretFile, n.JWTSecretFile, "the HS256 secret of the service tokens"},
	} {
		if s.path == "" {
			continue
		}
		if _, err := ReadSecret(s.path); err != nil {
			bad(s.key, s.path, "must be a file holding "+s.what, err)
		}
	}
	return issues
}

// ErrEmptySecret is returned (wrapped) by ReadSecret for a file with nothing in it.
var ErrEmptySecret = errors.New("the file is empty")

// ReadSecret reads a token or password file: its content without the white space
// around it (a file written by echo ends in a newline). The error never holds the
// content.
func ReadSecret(path string) (string, error) {
	if err := readable(path); err != nil {
		return "", err
	}
	data, err := readFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "", ErrEmptySecret
	}
	return s, nil
}

func readCA(path string) error {
	if err := readable(path); err != nil {
		return err
	}
	data, err := readFile(path)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return errors.New("no PEM certificate in it")
	}
	return nil
}

func checkSeed(path string) error {
	seed, err := ReadSecret(path)
	if err != nil {
		return err
	}
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return errors.New("not an nkey seed") // nkeys' error may quote the seed
	}
	kp.Wipe()
	return nil
}

// checkLimits checks the limits block: each share fits in what contains it.
func (c *Config) checkLimits(issues []Issue) []Issue {
	l := c.Limits
	bad := func(key, value, rule string) { issues = append(issues, c.issue(key, value, rule)) }
	itoa := strconv.Itoa
	if l.MemoryMiB < 16 || l.MemoryMiB > 1<<20 {
		bad(keyLimitsMemory, itoa(l.MemoryMiB), "must be a whole number of MiB from 16 to 1048576")
	}
	if l.ClientMemoryMiB < 1 || l.ClientMemoryMiB > l.MemoryMiB {
		bad(keyLimitsClient, itoa(l.ClientMemoryMiB), "must be a whole number of MiB from 1 to limits.memory_mib ("+itoa(l.MemoryMiB)+")")
	}
	if l.SessionMemoryMiB < 1 || l.SessionMemoryMiB > l.ClientMemoryMiB {
		bad(keyLimitsSession, itoa(l.SessionMemoryMiB), "must be a whole number of MiB from 1 to limits.client_memory_mib ("+itoa(l.ClientMemoryMiB)+")")
	}
	// Above limits.memory_mib it is cut to it (RequestUploadBytes), so a configuration
	// that lowers the memory bound need not lower this one too.
	if l.RequestUploadMiB < 1 || l.RequestUploadMiB > 1<<20 {
		bad(keyLimitsRequest, itoa(l.RequestUploadMiB), "must be a whole number of MiB from 1 to 1048576")
	}
	if l.Sessions < 1 || l.Sessions > 4096 {
		bad(keyLimitsSessions, itoa(l.Sessions), "must be a whole number from 1 to 4096")
	}
	if l.ClientSessions < 1 || l.ClientSessions > l.Sessions {
		bad(keyLimitsClientSes, itoa(l.ClientSessions), "must be a whole number from 1 to limits.sessions ("+itoa(l.Sessions)+")")
	}
	if !finite(l.SessionIdleSeconds) || l.SessionIdleSeconds <= 0 {
		bad(keyLimitsIdle, num(l.SessionIdleSeconds), rulePositiveSecs)
	}
	if !finite(l.SessionMaxSeconds) || l.SessionMaxSeconds < l.SessionIdleSeconds {
		bad(keyLimitsMax, num(l.SessionMaxSeconds), "must be a finite number of seconds, at least limits.session_idle_seconds ("+num(l.SessionIdleSeconds)+")")
	}
	return issues
}
