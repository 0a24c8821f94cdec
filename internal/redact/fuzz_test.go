package redact

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// Markers around every fuzzed secret: they make it long enough that finding it in the
// output means it leaked, and appear nowhere else in the texts built around it.
const secretHead, secretTail = "QZ7", "7ZQ"

// natsURLs parses a list of URLs as nats.go does (processUrlString, parseServerURL):
// split at commas, spaces trimmed, nats:// put before an element with no scheme.
func natsURLs(list string) ([]*url.URL, bool) {
	var out []*url.URL
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, false
		}
		out = append(out, u)
	}
	return out, len(out) > 0
}

// urlForms are the URLs, and lists of URLs, that carry secret as nats.go reads them:
// a password or a token, raw where net/url takes it raw and percent-encoded, with and
// without a scheme, alone and in a list, on a host name, an IPv4 and an IPv6 address.
// Each is kept only when nats.go would send secret from it.
func urlForms(secret string) []string {
	encPass := strings.TrimPrefix(url.UserPassword("semi", secret).String(), "semi:")
	encTok := url.User(secret).String()
	var infos []struct {
		info  string
		token bool
	}
	for _, pw := range []string{secret, encPass, url.QueryEscape(secret), url.PathEscape(secret)} {
		infos = append(infos, struct {
			info  string
			token bool
		}{"semi:" + pw, false})
	}
	for _, tok := range []string{secret, encTok} {
		infos = append(infos, struct {
			info  string
			token bool
		}{tok, true})
	}
	var forms []string
	for _, in := range infos {
		for _, host := range []string{"nats.example.com:4222", "127.0.0.1:4222", "[::1]:4222", "127.0.0.1"} {
			for _, scheme := range []string{"nats://", "tls://", "ws://", ""} {
				one := scheme + in.info + "@" + host
				for _, list := range []string{one, "nats://abi:other@h1:4222," + one, one + ", nats://h2:4222", "tls://t0k@h1," + one + ",nats://h3"} {
					us, ok := natsURLs(list)
					if !ok || !carries(us, secret, in.token) {
						continue
					}
					forms = append(forms, list)
				}
			}
		}
	}
	return forms
}

// carries reports that one of us would log in with secret: as its password, or as its
// user name alone (a token).
func carries(us []*url.URL, secret string, token bool) bool {
	for _, u := range us {
		if u.User == nil {
			continue
		}
		pw, hasPw := u.User.Password()
		switch {
		case token && !hasPw && u.User.Username() == secret:
			return true
		case !token && hasPw && pw == secret:
			return true
		}
	}
	return false
}

// contexts are the texts the engine prints a URL (list) in: alone, in an error, quoted
// by %q as net/url's errors quote it, in a JSON log line, and as nats.go's
// ConnectedUrl writes a URL it parsed.
func contexts(list string) map[string]string {
	jsonStr := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	c := map[string]string{
		"alone":    list,
		"error":    fmt.Sprintf("cannot connect to NATS at %s: nats: no servers available for connection (gave up after 5s)", list),
		"quoted":   fmt.Sprintf("parse %q: invalid port \":x\" after host", list),
		"json log": `{"level":"warn","msg":"cannot connect to nats; retrying","url":` + jsonStr(list) + `,"connection":"abi-engine lease x"}`,
		"config":   "nats.url = " + strconv.Quote(list) + " (ABI_NATS_URL): must be a list",
	}
	if us, ok := natsURLs(list); ok {
		for i, u := range us {
			c[fmt.Sprintf("connected url %d", i)] = `{"level":"info","msg":"nats reconnected","url":` + jsonStr(u.String()) + `}`
		}
	}
	return c
}

// spellings are the ways a secret can be written out: raw, percent-encoded (as user
// info, a query and a path encode it), and escaped by %q and by JSON.
func spellings(secret string) []string {
	jsonStr, _ := json.Marshal(secret)
	return []string{
		secret,
		strings.TrimPrefix(url.UserPassword("u", secret).String(), "u:"),
		url.User(secret).String(),
		url.QueryEscape(secret),
		url.PathEscape(secret),
		strings.Trim(strconv.Quote(secret), `"`),
		strings.Trim(string(jsonStr), `"`),
	}
}

// FuzzRedactURL: no secret, whatever printable characters it holds, survives String
// (or URLList) in any URL form nats.go accepts, in any text the engine prints a URL in,
// raw or percent-encoded or escaped.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"SE;CRET(x", "p@ss", "it's", "a,b", "p/w", "50%", "x y", `"q"`, `\`, "://", "a:b@c",
		allPrintable(), "pass)word", "pa;ss", "#?&=+$", "[]{}<>|^`~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		for _, r := range pw {
			if r < 0x20 || r > 0x7e {
				t.Skip("not printable ASCII")
			}
		}
		secret := secretHead + pw + secretTail
		for _, list := range urlForms(secret) {
			for what, text := range contexts(list) {
				for name, redacted := range map[string]string{"String": String(text), "URLList": URLList(text)} {
					for _, sp := range spellings(secret) {
						if strings.Contains(redacted, sp) {
							t.Fatalf("%s of %s %q leaves the secret as %q:\n%s", name, what, text, sp, redacted)
						}
					}
					if again := String(redacted); name == "String" && again != redacted {
						t.Fatalf("String is not idempotent on %q: %q", redacted, again)
					}
				}
			}
		}
	})
}

// allPrintable is every printable ASCII character, space to tilde.
func allPrintable() string {
	var b strings.Builder
	for c := byte(0x20); c <= 0x7e; c++ {
		b.WriteByte(c)
	}
	return b.String()
}
