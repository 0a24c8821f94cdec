package config

import (
	"strconv"
	"unicode/utf8"

	"github.com/abi-engine/engine/internal/redact"
)

// maxShown bounds a key or a value as a message shows it, and maxRule a rule. A value of
// megabytes (an environment variable filled by mistake, a file of one long line) would
// otherwise be echoed whole, once per problem.
const (
	maxShown = 256
	maxRule  = 4096
)

// shorten cuts s to about max bytes, at a character boundary, saying how long it was.
// A cut quoted string keeps its closing quote, so it still reads as one value.
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - 32
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	closing := ""
	if s[0] == '"' {
		closing = `"`
	}
	return s[:cut] + "…" + closing + " (" + strconv.Itoa(len(s)) + " bytes, cut)"
}

// quote is strconv.Quote for a value embedded in a rule, cut like any shown value. It
// is redacted before it is cut: a cut could fall between a password and the @ that
// tells it is one.
func quote(s string) string { return shorten(strconv.Quote(redact.String(s)), maxShown) }
