package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/abi-engine/engine/internal/testpki"
)

// credsFile writes a .creds file of a new user signed by a new account, its JWT valid
// from nbf until exp (zero: open), with the seed of seedOf (nil: the user's own).
func credsFile(t *testing.T, path string, nbf, exp time.Time, seedOf nkeys.KeyPair) string {
	t.Helper()
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	claims := jwt.NewUserClaims(pub)
	if !nbf.IsZero() {
		claims.NotBefore = nbf.Unix()
	}
	if !exp.IsZero() {
		claims.Expires = exp.Unix()
	}
	token, err := claims.Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	if seedOf != nil {
		// FormatUserConfig refuses a seed of another user; a hand-edited file has one.
		other, _ := seedOf.Seed()
		creds = []byte(strings.Replace(string(creds), string(seed), string(other), 1))
	}
	return writeSecret(t, path, string(creds))
}

// TestCheckParsesTheCredsFile: config check parses nats.credentials as nats.go does at
// connect, and a file that would fail the login is an issue naming the file and what is
// wrong in it (the dates, for a JWT out of its validity), never its seed.
func TestCheckParsesTheCredsFile(t *testing.T) {
	dir := t.TempDir()
	base := "nats:\n  url: nats://127.0.0.1:4222\n  credentials: "
	good := credsFile(t, filepath.Join(dir, "good.creds"), time.Time{}, time.Now().AddDate(1, 0, 0), nil)
	if _, err := checkFile(t, dir, base+good+"\n"); err != nil {
		t.Fatalf("a valid .creds file: %v", err)
	}
	other, _ := nkeys.CreateUser()
	expiredOn := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, path string
		says       []string
	}{
		{"garbage", writeSecret(t, filepath.Join(dir, "garbage.creds"), "this is not a creds file\n"), []string{"no valid user JWT"}},
		{"a seed alone", writeSecret(t, filepath.Join(dir, "seed.creds"), "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4\n"), []string{"no valid user JWT"}},
		{"another user's seed", credsFile(t, filepath.Join(dir, "mismatch.creds"), time.Time{}, time.Time{}, other), []string{"its nkey seed is of user", "the server refuses the login"}},
		{"expired", credsFile(t, filepath.Join(dir, "expired.creds"), time.Time{}, expiredOn, nil), []string{"the user JWT expired on 2024-03-01T12:00:00Z"}},
		{"not yet valid", credsFile(t, filepath.Join(dir, "later.creds"), time.Now().AddDate(5, 0, 0), time.Time{}, nil), []string{"the user JWT is not valid before "}},
		{"missing", filepath.Join(dir, "none.creds"), []string{"no such file"}},
	}
	for _, tc := range cases {
		_, err := checkFile(t, dir, base+tc.path+"\n")
		is := issueFor(t, err, "nats.credentials")
		s := is.String()
		for _, w := range append(tc.says, tc.path) {
			if !strings.Contains(s, w) {
				t.Errorf("%s: issue %q does not say %q", tc.name, s, w)
			}
		}
		if strings.Contains(err.Error(), "SUA") {
			t.Errorf("%s: the error prints a seed: %v", tc.name, err)
		}
	}
}

// TestCheckRefusesAClientCertificateOutOfItsDates: an expired client certificate, and
// one not valid yet, are issues naming the file and the dates, where the engine would
// see only a broken connection.
func TestCheckRefusesAClientCertificateOutOfItsDates(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	until := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	expired, err := ca.ClientValid("expired", from, until)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().AddDate(3, 0, 0).UTC().Truncate(time.Second)
	notYet, err := ca.ClientValid("not-yet", later, later.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	base := "nats:\n  url: tls://127.0.0.1:4222\n"
	for _, tc := range []struct {
		name string
		pair testpki.Pair
		says []string
	}{
		{"expired", expired, []string{"must be a client certificate valid now", "expired on 2024-01-01T00:00:00Z", "valid from 2023-01-01T00:00:00Z until 2024-01-01T00:00:00Z"}},
		{"not yet valid", notYet, []string{"is not valid before " + later.Format(dateLayout)}},
	} {
		_, err := checkFile(t, dir, base+"  tls: {ca_file: "+ca.CertFile+", cert_file: "+tc.pair.CertFile+", key_file: "+tc.pair.KeyFile+"}\n")
		is := issueFor(t, err, "nats.tls.cert_file")
		for _, w := range append(tc.says, tc.pair.CertFile) {
			if !strings.Contains(is.String(), w) {
				t.Errorf("%s: issue %q does not say %q", tc.name, is, w)
			}
		}
		var ve *ValidityError
		if !errors.As(validAt(time.Now(), "x", from, until), &ve) {
			t.Errorf("validAt of an expired period is not a *ValidityError")
		}
	}
}

// TestCheckRolloutID: an id outside the rule of nats.engine.rollout_id is refused,
// naming it and the rule.
func TestCheckRolloutID(t *testing.T) {
	for _, ok := range []string{"", "v2", "2026-12-07_a:b.c"} {
		if err := CheckRolloutID(ok); err != nil {
			t.Errorf("CheckRolloutID(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"bad id", "-v2", strings.Repeat("a", 129)} {
		err := CheckRolloutID(bad)
		if !errors.Is(err, ErrRolloutID) || !strings.Contains(err.Error(), "must match") {
			t.Errorf("CheckRolloutID(%q) = %v, want ErrRolloutID naming the rule", bad, err)
		}
	}
}
