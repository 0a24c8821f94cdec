package client

// The service token (protocol.HeaderAuthToken) a transport sends on every request when
// the engines it calls require one (their nats.jwt_secret_file): minted here from the
// shared secret, reissued before it expires.

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/protocol"
)

// tokenRenewBefore is how long before its expiry a token is replaced, so that a call
// never carries one that expires on its way.
const tokenRenewBefore = 5 * time.Minute

// WithServiceToken makes the transport send a service token on every request: an
// HS256 JWT for caller (its `sub`), signed with secret, the account's secret that the
// engines read from nats.jwt_secret_file. Tokens last an hour and are reissued five
// minutes before they expire.
func WithServiceToken(secret []byte, caller string) Option {
	return func(t *Transport) {
		t.tokens = &tokenSource{secret: append([]byte(nil), secret...), caller: caller}
	}
}

// tokenSource mints and caches the transport's token; safe for concurrent use.
type tokenSource struct {
	secret []byte
	caller string

	mu      sync.Mutex
	token   string
	expires time.Time
}

func (s *tokenSource) check() error {
	switch {
	case len(s.secret) == 0:
		return errors.New("WithServiceToken: the secret is empty")
	case s.caller == "":
		return errors.New("WithServiceToken: the caller is empty")
	}
	return nil
}

// at is a token valid at now.
func (s *tokenSource) at(now time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && now.Before(s.expires.Add(-tokenRenewBefore)) {
		return s.token, nil
	}
	tok, err := servicetoken.Mint(s.secret, s.caller, now, servicetoken.DefaultTTL)
	if err != nil {
		return "", err
	}
	s.token, s.expires = tok, now.Add(servicetoken.DefaultTTL)
	return tok, nil
}

// withToken is headers with the transport's token, as a copy (a caller's headers are
// never written to); headers itself without a token source.
func (t *Transport) withToken(headers nats.Header, now time.Time) (nats.Header, error) {
	if t.tokens == nil {
		return headers, nil
	}
	tok, err := t.tokens.at(now)
	if err != nil {
		return nil, fmt.Errorf("client: mint the service token: %w", err)
	}
	h := make(nats.Header, len(headers)+1)
	maps.Copy(h, headers)
	h[protocol.HeaderAuthToken] = []string{tok}
	return h, nil
}
