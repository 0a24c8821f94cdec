package servicetoken

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	now    = time.Unix(1_800_000_000, 0)
)

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	v, err := NewVerifier(secret, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	good, err := Mint(secret, "sdk-ci", now, DefaultTTL)
	if err != nil {
		t.Fatal(err)
	}
	if sub, err := v.Verify(good); err != nil || sub != "sdk-ci" {
		t.Fatalf("Verify(minted) = %q, %v", sub, err)
	}
	hs := jwt.SigningMethodHS256
	refused := map[string]string{
		"empty":         "",
		"garbage":       "not.a.jwt",
		"wrong secret":  sign(t, hs, []byte("another secret of enough length!"), jwt.MapClaims{"sub": "a", "exp": now.Add(time.Hour).Unix()}),
		"expired":       sign(t, hs, secret, jwt.MapClaims{"sub": "a", "iat": now.Add(-2 * time.Hour).Unix(), "exp": now.Add(-time.Hour).Unix()}),
		"expires now":   sign(t, hs, secret, jwt.MapClaims{"sub": "a", "exp": now.Unix()}),
		"not yet valid": sign(t, hs, secret, jwt.MapClaims{"sub": "a", "nbf": now.Add(time.Minute).Unix()}),
		"issued later":  sign(t, hs, secret, jwt.MapClaims{"sub": "a", "iat": now.Add(time.Minute).Unix()}),
		"audience":      sign(t, hs, secret, jwt.MapClaims{"sub": "a", "aud": "api"}),
		"no sub":        sign(t, hs, secret, jwt.MapClaims{"exp": now.Add(time.Hour).Unix()}),
		"empty sub":     sign(t, hs, secret, jwt.MapClaims{"sub": ""}),
		"numeric sub":   sign(t, hs, secret, jwt.MapClaims{"sub": 7}),
		"HS512":         sign(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "a"}),
		"alg none":      sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "a"}),
	}
	for name, tok := range refused {
		if sub, err := v.Verify(tok); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Verify = %q, %v; want ErrInvalid", name, sub, err)
		}
	}
	// No exp at all is accepted, as PyJWT does.
	if _, err := v.Verify(sign(t, hs, secret, jwt.MapClaims{"sub": "a"})); err != nil {
		t.Errorf("a token without exp: %v", err)
	}
}

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s")
	if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadSecretFile(p); err != nil || string(b) != "s3cret" {
		t.Fatalf("ReadSecretFile = %q, %v", b, err)
	}
	if err := os.WriteFile(p, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecretFile(p); !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), p) {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := NewVerifier(nil, nil); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("NewVerifier(nil): %v", err)
	}
}

// TestRememberedTokensStillExpire: a token accepted once is accepted again without
// its signature being checked, but never past its exp.
func TestRememberedTokensStillExpire(t *testing.T) {
	clock := now
	v, err := NewVerifier(secret, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Mint(secret, "sdk-ci", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if sub, err := v.Verify(tok); err != nil || sub != "sdk-ci" {
			t.Fatalf("Verify = %q, %v", sub, err)
		}
	}
	clock = now.Add(time.Minute - time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("a second before exp: %v", err)
	}
	clock = now.Add(time.Minute)
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("at exp: %v, want ErrInvalid", err)
	}
	// A token another secret signed is never taken from what was remembered.
	forged, _ := Mint([]byte("another secret of enough length!"), "sdk-ci", now, time.Hour)
	clock = now
	if _, err := v.Verify(forged); !errors.Is(err, ErrInvalid) {
		t.Fatalf("forged: %v", err)
	}
}

func BenchmarkVerify(b *testing.B) {
	v, _ := NewVerifier(secret, nil)
	tok, _ := Mint(secret, "sdk-ci", time.Now(), time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
