// Package redact takes secrets out of text the engine prints: the password, or the
// token, in the user info of a URL, in every form nats.go accepts (nats://user:pass@host,
// nats://token@host, user:pass@host:port with no scheme, percent-encoded or not, one
// URL of a comma-separated list), in a PostgreSQL URL, and the value of a password=
// pair (a key=value connection string, a URL query). Every URL and configuration value
// the engine logs, returns in an error or prints passes through String (or URLList,
// for a value known to be a list of URLs); Writer applies String to a log's output as a
// last line of defence.
//
// It is one helper for every output on purpose: nats.go's ConnectedUrlRedacted (and
// net/url's Redacted, which it uses) hides a password but prints a token, which NATS
// takes as the user name of a URL without a password, in full.
//
// The user info of a URL ends at its last @, as for net/url, and a password may hold
// any printable character (raw where net/url takes it: ; ( ) ' , and the like;
// percent-encoded otherwise), so no character is taken as the end of a URL in free
// text: what lies between a scheme's :// and the last @ before the next URL, or the
// end of the line, is user info. That masks too much when other text with an @
// follows a URL on its line, a price paid so that no secret is printed.
package redact

import (
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a secret, as net/url's Redacted writes it.
const Mask = "xxxxx"

// passwordPair is password=<value> in free text: the value runs to white space, an
// ampersand or a double quote, or is a single-quoted string (libpq's key=value form).
var passwordPair = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&"]+)`)

// String returns s with every secret replaced by Mask. It leaves the user name of a
// URL with a password (nats://abi:xxxxx@host), so the text still says who connects.
func String(s string) string {
	if strings.Contains(s, "@") {
		s = schemeURLs(s)
		s = bareURLs(s)
	}
	if strings.Contains(strings.ToLower(s), "password") {
		s = passwordPair.ReplaceAllString(s, "${1}"+Mask)
	}
	return s
}

// URLList returns a list of URLs (nats.url, --nats) with the user info of each masked,
// the elements split as nats.go splits them (at commas), a scheme or none. A list with
// an element net/url cannot parse (a comma in a password cuts one in two) is masked
// as free text: up to its last @.
func URLList(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		trimmed := strings.TrimSpace(p)
		if trimmed == "" {
			continue
		}
		if !strings.Contains(trimmed, "://") {
			trimmed = "nats://" + trimmed
		}
		if _, err := url.Parse(trimmed); err != nil {
			return String(s)
		}
		head, rest := "", p
		if j := strings.Index(p, "://"); j >= 0 {
			head, rest = p[:j+3], p[j+3:]
		}
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			lead := len(rest) - len(strings.TrimLeft(rest, " \t"))
			head, rest = head+rest[:lead], maskInfo(rest[lead:at])+rest[at:]
		}
		parts[i] = String(head + rest)
	}
	return strings.Join(parts, ",")
}

// maskInfo masks the user info of a URL: its password, keeping a user name that
// cannot be confused with anything else, or all of it (a token).
func maskInfo(info string) string {
	if info == "" {
		return ""
	}
	user, _, hasPassword := strings.Cut(info, ":")
	if hasPassword && user != "" && !strings.ContainsAny(user, "/?#") {
		return user + ":" + Mask
	}
	return Mask
}

// schemeURLs masks the user info of every scheme://...@ in s.
func schemeURLs(s string) string {
	// A log entry in JSON escapes every quote inside a string: one that is not escaped
	// ends the string, and so the URL in it.
	jsonEntry := strings.HasPrefix(s, "{")
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
		at := strings.LastIndexByte(rest[:urlEnd(rest, jsonEntry)], '@')
		if at < 0 {
			continue
		}
		b.WriteString(maskInfo(rest[:at]))
		rest = rest[at:]
	}
}

// urlEnd is where the URL that rest begins (after its ://) can end at the latest: the
// start of the next URL (its scheme), a line's end, the end of its JSON string (in a
// JSON entry), or the end of rest.
func urlEnd(rest string, jsonEntry bool) int {
	end := len(rest)
	if nl := strings.IndexAny(rest, "\r\n"); nl >= 0 {
		end = nl
	}
	if jsonEntry {
		end = min(end, unescapedQuote(rest))
	}
	if next := strings.Index(rest[:end], "://"); next >= 0 {
		k := next
		for k > 0 && isSchemeByte(rest[k-1]) {
			k--
		}
		end = k
	}
	return end
}

// unescapedQuote is the index of the first " in s not escaped by a backslash, len(s)
// when there is none.
func unescapedQuote(s string) int {
	backslashes := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			backslashes++
			continue
		case '"':
			if backslashes%2 == 0 {
				return i
			}
		}
		backslashes = 0
	}
	return len(s)
}

func isSchemeByte(c byte) bool { return isAlnum(c) || c == '+' || c == '-' || c == '.' }

// bareEnd holds what ends a URL with no scheme in free text: what net/url never takes
// raw in user info (white space, quotes, brackets, backslash) and the comma, at which
// nats.go splits a list.
const bareEnd = " \t\r\n\"<>{}[]`\\|^,"

// bareURLs masks the user info of URLs with no scheme (user:pass@host, token@host:port,
// token@127.0.0.1), which nats.go takes as nats:// URLs. An @ with neither a password
// before it nor a port or an IP address after it is left alone: mail@example.com.
func bareURLs(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexAny(s, bareEnd)
		if i < 0 {
			i = len(s)
		}
		b.WriteString(bareToken(s[:i]))
		if i == len(s) {
			break
		}
		b.WriteByte(s[i])
		s = s[i+1:]
	}
	return b.String()
}

func bareToken(tok string) string {
	at := strings.LastIndexByte(tok, '@')
	if at <= 0 || strings.Contains(tok, "://") {
		return tok
	}
	info, host := tok[:at], tok[at+1:]
	if info == Mask || strings.HasSuffix(info, ":"+Mask) {
		return tok
	}
	if strings.Contains(info, ":") || hostLooksLikeBroker(host) {
		return maskInfo(info) + tok[at:]
	}
	return tok
}

// hostLooksLikeBroker reports a host part (after the @) with a port, or an IP address
// or localhost: what a mail address has not.
func hostLooksLikeBroker(host string) bool {
	if host == "" || host[0] == '[' {
		return true // an IPv6 address, or the host went to the next token
	}
	i := 0
	for i < len(host) && (isAlnum(host[i]) || host[i] == '.' || host[i] == '-') {
		i++
	}
	name := host[:i]
	if i+1 < len(host) && host[i] == ':' && '0' <= host[i+1] && host[i+1] <= '9' {
		return true
	}
	return net.ParseIP(name) != nil || strings.EqualFold(name, "localhost")
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
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
