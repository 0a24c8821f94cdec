package objectstorage

import (
	"strings"
	"unicode/utf8"

	"github.com/abi-engine/engine/protocol"
)

// Limits of names. A key and each prefix segment is at most MaxSegmentBytes, the limit
// of a file name on common file systems, so every backend can store every valid name.
const (
	MaxSegmentBytes = 255
	MaxPrefixBytes  = 1024
)

// CheckPrefix returns an INVALID_ARGUMENT error when prefix is not a valid prefix: empty
// is the top level; otherwise UTF-8 segments separated by single "/", none of them
// empty, "." or "..", none longer than MaxSegmentBytes, no NUL, at most MaxPrefixBytes
// in all. The rules also keep a prefix from leaving a file system backend's root.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxPrefixBytes {
		return protocol.Errorf(protocol.InvalidArgument, "prefix is %d bytes long, the limit is %d", len(prefix), MaxPrefixBytes)
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		if seg == "" {
			return protocol.Errorf(protocol.InvalidArgument, "prefix %q has an empty segment: it must not start or end with / nor contain //", prefix)
		}
		if err := checkSegment("prefix segment", seg); err != nil {
			return err
		}
	}
	return nil
}

// CheckKey returns an INVALID_ARGUMENT error when key is not a valid key: one non-empty
// UTF-8 segment without "/" or NUL, not "." or "..", at most MaxSegmentBytes.
func CheckKey(key string) error {
	if key == "" {
		return protocol.Errorf(protocol.InvalidArgument, "key must not be empty")
	}
	if strings.Contains(key, "/") {
		return protocol.Errorf(protocol.InvalidArgument, "key %.64q contains /: put the path in the prefix", key)
	}
	return checkSegment("key", key)
}

func checkSegment(what, s string) error {
	switch {
	case len(s) > MaxSegmentBytes:
		return protocol.Errorf(protocol.InvalidArgument, "%s is %d bytes long, the limit is %d", what, len(s), MaxSegmentBytes)
	case !utf8.ValidString(s):
		return protocol.Errorf(protocol.InvalidArgument, "%s %.64q is not valid UTF-8", what, s)
	case s == "." || s == "..":
		return protocol.Errorf(protocol.InvalidArgument, "%s must not be %q", what, s)
	case strings.ContainsRune(s, 0):
		return protocol.Errorf(protocol.InvalidArgument, "%s %.64q contains a NUL byte", what, s)
	}
	return nil
}

// CheckName checks a prefix and a key together.
func CheckName(prefix, key string) error {
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	return CheckKey(key)
}

// NotFound is the error of a missing object.
func NotFound(prefix, key string) error {
	return protocol.Errorf(protocol.NotFound, "no object %.64q under prefix %.64q", key, prefix)
}
