// Package servicetoken mints and verifies the service token (Nats-Auth-Token) the
// Python clients of the kernel services send on every call: an HS256 JWT whose `sub`
// names the caller, signed with a secret the engine and its callers share.
//
// Verification follows what the Python engine does with PyJWT, so a token one engine
// accepts the other accepts too: the signature with HS256 only; `exp` and `nbf` when
// present, with no leeway; a numeric `iat` in the future refused; any `aud` refused
// (no audience is expected); and a non-empty string `sub`. Every failure is the same
// error to the caller (ErrInvalid); the reason is for the engine's log.
//
// The JWT parsing is github.com/golang-jwt/jwt/v5's: a maintained library whose
// algorithm allow-list closes the "alg: none" and key-confusion holes a hand-written
// check would have to close itself.
package servicetoken

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrInvalid is what every refused token matches (errors.Is); the wrapped error says
// why, for logs only.
var ErrInvalid = errors.New("missing or invalid auth token")

// ErrNoSecret is a secret that cannot sign: empty, or a file holding nothing.
var ErrNoSecret = errors.New("servicetoken: the secret is empty")

// DefaultTTL is how long a minted token lives, as the Python engine's tokens do.
const DefaultTTL = time.Hour

// Verifier checks tokens against one secret. It is safe for concurrent use.
//
// A client sends the same token on every call for up to an hour, so the verifier
// remembers the tokens it accepted: a token seen before skips the signature and the
// JSON parsing, and only its times are checked again (a remembered token's claims are
// those of its exact bytes, which the signature covered).
type Verifier struct {
	secret []byte
	parser *jwt.Parser
	now    func() time.Time

	mu       sync.Mutex
	accepted map[string]accepted // by token, at most maxAccepted
}

// accepted is what a valid token's times allow: it stays valid from notBefore (zero:
// always) until expires (zero: never).
type accepted struct {
	sub                string
	notBefore, expires time.Time
}

// maxAccepted bounds the tokens a Verifier remembers; past it, it forgets them all
// (callers then pay one full check each).
const maxAccepted = 4096

// NewVerifier checks tokens signed with secret; now is the clock (nil: time.Now).
func NewVerifier(secret []byte, now func() time.Time) (*Verifier, error) {
	if len(secret) == 0 {
		return nil, ErrNoSecret
	}
	if now == nil {
		now = time.Now
	}
	return &Verifier{
		secret: bytes.Clone(secret),
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithIssuedAt(), jwt.WithTimeFunc(now)),
		now:      now,
		accepted: map[string]accepted{},
	}, nil
}

// Verify returns the caller (`sub`) of a valid token, or an error matching ErrInvalid.
func (v *Verifier) Verify(token string) (string, error) {
	if token == "" {
		return "", fmt.Errorf("%w: no token", ErrInvalid)
	}
	v.mu.Lock()
	a, ok := v.accepted[token]
	v.mu.Unlock()
	if ok {
		now := v.now()
		switch {
		case !a.expires.IsZero() && !now.Before(a.expires):
			return "", fmt.Errorf("%w: the token has expired", ErrInvalid)
		case !a.notBefore.IsZero() && now.Before(a.notBefore):
			return "", fmt.Errorf("%w: the token is not valid yet", ErrInvalid)
		}
		return a.sub, nil
	}
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return v.secret, nil })
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, ok := claims["aud"]; ok {
		// PyJWT refuses an audience it was not told to expect; so do we.
		return "", fmt.Errorf("%w: the token names an audience", ErrInvalid)
	}
	sub, ok := claims["sub"].(string)
	if !ok || sub == "" {
		return "", fmt.Errorf("%w: the token has no caller (sub)", ErrInvalid)
	}
	a = accepted{sub: sub}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		a.expires = exp.Time
	}
	if nbf, err := claims.GetNotBefore(); err == nil && nbf != nil {
		a.notBefore = nbf.Time
	}
	v.mu.Lock()
	if len(v.accepted) >= maxAccepted {
		clear(v.accepted)
	}
	v.accepted[token] = a
	v.mu.Unlock()
	return sub, nil
}

// Mint signs a token for caller sub, issued at now and expiring ttl later.
func Mint(secret []byte, sub string, now time.Time, ttl time.Duration) (string, error) {
	if len(secret) == 0 {
		return "", ErrNoSecret
	}
	if sub == "" {
		return "", errors.New("servicetoken: the caller (sub) is empty")
	}
	claims := jwt.MapClaims{"sub": sub, "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// ReadSecretFile reads the secret from path: the file's content without the white
// space around it (a file written by echo ends in a newline), as the engine reads its
// other secret files. The error names the file, never its content.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("servicetoken: read the secret file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("servicetoken: the secret file %s is empty: %w", path, ErrNoSecret)
	}
	return b, nil
}
