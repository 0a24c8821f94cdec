// Package redact takes secrets out of text the engine prints: the password, or the
// token, in the user info of a URL (nats://user:pass@host, nats://token@host,
// postgres://user:pass@host/db, in a comma-separated list as well) and the value of a
// password= pair (a key=value connection string, a URL query). Every URL and
// configuration value the engine logs, returns in an error or prints passes through
// String; Writer applies it to a log's output as a last line of defence.
//
// It is one helper for every output on purpose: nats.go's ConnectedUrlRedacted (and
// net/url's Redacted, which it uses) hides a password but prints a token, which NATS
// takes as the user name of a URL without a password, in full.
package redact

import (
	"io"
	"regexp"
	"strings"
)

// Mask replaces a secret, as net/url's Redacted writes it.
const Mask = "xxxxx"

// passwordPair is password=<value> in free text: the value runs to a space, a quote,
// an ampersand or a comma, or is a single-quoted string (libpq's key=value form).
var passwordPair = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'",;]+)`)

// String returns s with every secret replaced by Mask. It leaves the user name of a
// URL with a password (nats://abi:xxxxx@host), so the text still says who connects.
func String(s string) string {
	if strings.Contains(s, "://") && strings.Contains(s, "@") {
		s = userInfo(s)
	}
	if strings.Contains(strings.ToLower(s), "password") {
		s = passwordPair.ReplaceAllString(s, "${1}"+Mask)
	}
	return s
}

// tokenEnd holds what ends a URL in free text: white space, and the quotes, brackets
// and separators text puts around a URL (a comma separates the URLs of a list).
const tokenEnd = "\"'`<>(){},; \t\r\n\\"

// userInfo masks the user info of every URL in s. The user info ends at the URL's last
// @, as for net/url, since a password may hold one; a password may also hold a '/'
// that would end the host part of a valid URL, so the @ is looked for up to the end of
// the URL in the text, and whatever comes before it is masked when it is not a plain
// user name and password. A URL with an @ in its path loses its host part: a price
// paid so that no password is printed.
func userInfo(s string) string {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		start := i + len("://")
		b.WriteString(rest[:start])
		rest = rest[start:]
		end := strings.IndexAny(rest, tokenEnd)
		if end < 0 {
			end = len(rest)
		}
		at := strings.LastIndexByte(rest[:end], '@')
		if at < 0 {
			continue
		}
		info := rest[:at]
		user, _, hasPassword := strings.Cut(info, ":")
		switch {
		case hasPassword && !strings.ContainsAny(user, "/?#"):
			b.WriteString(user + ":" + Mask)
		case info != "":
			b.WriteString(Mask) // a token, or user info we cannot tell apart
		}
		rest = rest[at:]
	}
}

// Writer returns a writer that redacts what it writes before passing it to w. Each
// Write is redacted on its own, so a secret split across two writes is not found: a
// logger writes each entry in one Write.
func Writer(w io.Writer) io.Writer { return writer{w} }

type writer struct{ w io.Writer }

func (r writer) Write(p []byte) (int, error) {
	s := string(p)
	out := String(s)
	if out == s {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}
