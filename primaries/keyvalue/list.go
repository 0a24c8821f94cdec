package keyvalue

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

// MaxListLimit is the most keys one ListKeys page holds, the Python engine's bound.
const MaxListLimit = 1000

// CheckList returns an INVALID_ARGUMENT error when a listing's arguments are not
// valid: limit outside 1..MaxListLimit (the Python engine's message, which its
// clients show), or a prefix or after that is not UTF-8 or longer than a key can be.
// Every Store implementation calls it before touching its backend.
func CheckList(prefix, after string, limit int) error {
	if limit < 1 || limit > MaxListLimit {
		return protocol.Errorf(protocol.InvalidArgument, "limit must be between 1 and %d, got %d", MaxListLimit, limit)
	}
	for _, a := range [...]struct{ name, v string }{{"prefix", prefix}, {"after", after}} {
		switch {
		case len(a.v) > MaxKeyBytes:
			return protocol.Errorf(protocol.InvalidArgument, "%s is %d bytes long, the limit is %d", a.name, len(a.v), MaxKeyBytes)
		case !utf8.ValidString(a.v):
			return protocol.Errorf(protocol.InvalidArgument, "%s is not valid UTF-8", a.name)
		}
	}
	return nil
}

// Page cuts a listing out of keys, which need not be sorted and may hold keys outside
// it: the ones that start with prefix and sort after after, sorted, at most limit. A
// backend that cannot ask its storage for a range in order (a JetStream bucket, a
// map) lists its live keys and pages them here.
func Page(keys []string, prefix, after string, limit int) ([]string, bool) {
	out := make([]string, 0, min(len(keys), limit+1))
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) && k > after {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		return out[:limit:limit], true
	}
	return out, false
}

// SeekFrom is where an ordered scan of a listing starts: the first key that can be in
// it is prefix itself or the first key after after, whichever sorts later.
func SeekFrom(prefix, after string) string {
	if after >= prefix {
		return after
	}
	return prefix
}
