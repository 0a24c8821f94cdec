package keyvalue

import (
	"math"
	"time"
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

// MaxKeyBytes is the longest key, in bytes of UTF-8.
const MaxKeyBytes = 1024

// CheckKey returns an INVALID_ARGUMENT error when key is not a valid key: empty, longer
// than MaxKeyBytes, or not UTF-8. Every Store implementation calls it before touching
// its backend; a client must call it before encoding the key as JSON, which would
// replace invalid UTF-8 with U+FFFD and so address another key.
func CheckKey(key string) error {
	switch {
	case key == "":
		return protocol.Errorf(protocol.InvalidArgument, "key must not be empty")
	case len(key) > MaxKeyBytes:
		return protocol.Errorf(protocol.InvalidArgument, "key is %d bytes long, the limit is %d", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return protocol.Errorf(protocol.InvalidArgument, "key is not valid UTF-8")
	}
	return nil
}

// CheckTTL returns an INVALID_ARGUMENT error for a negative ttl (0 means no expiry).
func CheckTTL(ttl time.Duration) error {
	if ttl < 0 {
		return protocol.Errorf(protocol.InvalidArgument, "ttl must not be negative, got %s", ttl)
	}
	return nil
}

// CheckSet checks the key and the ttl of a write.
func CheckSet(key string, ttl time.Duration) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return CheckTTL(ttl)
}

// maxTTLSeconds is the longest TTL accepted: about 146 years, well inside what a
// time.Duration holds, so the conversion below cannot overflow.
const maxTTLSeconds = float64(1<<62) / float64(time.Second)

// TTLFromSeconds converts the wire's ttl_seconds to a Duration, rounding up so that a
// positive TTL never becomes "no expiry".
func TTLFromSeconds(s float64) (time.Duration, error) {
	switch {
	case s < 0:
		return 0, protocol.Errorf(protocol.InvalidArgument, "ttl_seconds must not be negative, got %g", s)
	case s >= maxTTLSeconds:
		return 0, protocol.Errorf(protocol.InvalidArgument, "ttl_seconds %g is too large, the limit is %.0f", s, maxTTLSeconds)
	}
	return time.Duration(math.Ceil(s * float64(time.Second))), nil
}
