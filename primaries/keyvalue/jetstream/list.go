package jetstream

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/primaries/keyvalue"
)

// ListKeys pages the live keys that start with prefix (keyvalue.Store). The bucket
// stores keys encoded, whose order is not the keys', so every page lists the bucket's
// keys (without their values) and cuts the page out of them: a cost proportional to
// the bucket, which a listing pays anyway on a KV bucket.
func (s *Store) ListKeys(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	if err := keyvalue.CheckList(prefix, after, limit); err != nil {
		return nil, false, err
	}
	lister, err := s.kv.ListKeys(ctx)
	if errors.Is(err, js.ErrNoKeysFound) {
		return []string{}, false, nil
	}
	if err != nil {
		return nil, false, s.readError("list_keys", prefix, err)
	}
	defer func() { _ = lister.Stop() }()
	var keys []string
	for enc := range lister.Keys() {
		// The engine's own keys (the epoch record, the fence) have dots, which no
		// encoded user key has; they do not decode and are not listed.
		raw, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		keys = append(keys, string(raw))
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	page, more := keyvalue.Page(keys, prefix, after, limit)
	return page, more, nil
}

// TTL is the time key still lives, 0 when it never expires (keyvalue.Store): what
// is left of its message's TTL, counted from when the server stored it. A delete or
// expiry marker is a missing key.
func (s *Store) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return 0, false, err
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, s.prefix+encode(key))
	if errors.Is(err, js.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.readError("get_ttl", key, err)
	}
	op := m.Header.Get(kvOperation)
	if op == kvDelete || op == kvPurge || m.Header.Get(js.MarkerReasonHeader) != "" {
		return 0, false, nil
	}
	ttl, ok := messageTTL(m.Header.Get(js.MsgTTLHeader))
	if !ok {
		return 0, true, nil
	}
	left := time.Until(m.Time.Add(ttl))
	if left <= 0 {
		// Past its TTL by this host's clock but not yet removed by the server's: the
		// key is still readable, so it still lives, for a moment.
		left = time.Nanosecond
	}
	return left, true, nil
}

// messageTTL parses a message's TTL header as the server does: a Go duration or whole
// seconds; none, "never" or anything else is no expiry.
func messageTTL(h string) (time.Duration, bool) {
	if h == "" || strings.EqualFold(h, "never") {
		return 0, false
	}
	if d, err := time.ParseDuration(h); err == nil && d > 0 {
		return d, true
	}
	if n, err := strconv.ParseInt(h, 10, 64); err == nil && n > 0 {
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}
