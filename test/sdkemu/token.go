package sdkemu

import (
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Mint signs a service token as the Python engine's issue_service_token does: HS256,
// claims sub, iat and exp (iat + ttl).
func Mint(secret []byte, sub string, iat time.Time, ttl time.Duration) (string, error) {
	claims := jwt.MapClaims{"sub": sub, "iat": iat.Unix(), "exp": iat.Add(ttl).Unix()}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// Static is a token function that always gives token.
func Static(token string) func() string { return func() string { return token } }
