package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// This file holds what `abi-engine config check` reads in a .creds file and a client
// certificate beyond "the file can be read": what would otherwise fail only at connect,
// after an engine retried for its connect timeout and reported a broken pipe.

// dateLayout is how a validity date is shown: to the second, in UTC.
const dateLayout = "2006-01-02T15:04:05Z"

// checkCreds parses a NATS .creds file as nats.go does at connect: a user JWT and the
// user's nkey seed, decorated or not. It also checks what the server would refuse: a
// JWT whose signature does not verify, a seed whose public key is not the JWT's
// subject, a JWT expired or not yet valid at now. The error never quotes the file's
// content (the seed is a secret).
func checkCreds(path string, now time.Time) error {
	if err := readable(path); err != nil {
		return err
	}
	data, err := readFile(path)
	if err != nil {
		return err
	}
	defer clear(data)
	token, err := nkeys.ParseDecoratedJWT(data)
	if err != nil {
		return errors.New("no user JWT in it")
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		// The decoder's words name a part of the JWT, never the seed.
		return fmt.Errorf("no valid user JWT in it (%v)", err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return errors.New("no user nkey seed (SU...) in it")
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return errors.New("its nkey seed does not give a public key")
	}
	if pub != claims.Subject {
		return fmt.Errorf("its nkey seed is of user %s, but its JWT is of user %s: the server refuses the login", pub, claims.Subject)
	}
	return validAt(now, "the user JWT", unixTime(claims.NotBefore), unixTime(claims.Expires))
}

// checkClientCert loads a client certificate and its key as the engine's TLS does and
// checks the certificate is valid at now: an expired one is refused by the server in
// its handshake, which a client sees only as a broken connection.
func checkClientCert(certFile, keyFile string, now time.Time) error {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	leaf := pair.Leaf // set by LoadX509KeyPair
	if leaf == nil {
		return errors.New("no certificate in it")
	}
	return validAt(now, "the certificate", leaf.NotBefore, leaf.NotAfter)
}

// unixTime is a JWT date, the zero time for none.
func unixTime(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

// ValidityError is a credential (a client certificate, a user JWT) used outside its
// validity period: the server refuses it at the handshake or the login.
type ValidityError struct {
	What        string    // "the certificate", "the user JWT"
	From, Until time.Time // the period; a zero bound is open
	Now         time.Time // when it was checked
}

func (e *ValidityError) Error() string {
	day := func(t time.Time) string { return t.UTC().Format(dateLayout) }
	var period string
	switch {
	case e.From.IsZero():
		period = "valid until " + day(e.Until)
	case e.Until.IsZero():
		period = "valid from " + day(e.From)
	default:
		period = "valid from " + day(e.From) + " until " + day(e.Until)
	}
	if !e.Until.IsZero() && e.Now.After(e.Until) {
		return fmt.Sprintf("%s expired on %s (%s; now is %s)", e.What, day(e.Until), period, day(e.Now))
	}
	return fmt.Sprintf("%s is not valid before %s (%s; now is %s)", e.What, day(e.From), period, day(e.Now))
}

// validAt says whether now is in [from, until]; a zero bound is open.
func validAt(now time.Time, what string, from, until time.Time) error {
	if (!until.IsZero() && now.After(until)) || (!from.IsZero() && now.Before(from)) {
		return &ValidityError{What: what, From: from, Until: until, Now: now}
	}
	return nil
}
