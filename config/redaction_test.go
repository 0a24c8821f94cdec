package config

import (
	"strings"
	"testing"
)

// TestAnInvalidNATSURLPrintsNoSecret: an invalid nats.url is shown with its user info
// masked, whatever the password holds: a comma (at which the list is split, so half of
// the password stands in an element with no @), a semicolon or a parenthesis, and a
// value long enough to be cut (redacted before the cut, which could fall before the @).
func TestAnInvalidNATSURLPrintsNoSecret(t *testing.T) {
	long := strings.Repeat("L0ng", 100)
	for _, tc := range []struct{ url, secret string }{
		{"nats://semi:SEC,RET@h:4222", "SEC"},
		{"nats://semi:SE;CRET(x@h:99999", "CRET(x"},
		{"semi:SE;CRET(x@h:99999", "CRET(x"},
		{"t0ken-S3cret@nats.example.com:0", "S3cret"},
		{"nats://semi:" + long + "@h:99999", "L0ngL0ng"},
	} {
		c := Default()
		c.NATS.URL = tc.url
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: valid", tc.url)
			continue
		}
		if strings.Contains(err.Error(), tc.secret) {
			t.Errorf("the error for %q prints %q:\n%v", tc.url, tc.secret, err)
		}
	}
}
