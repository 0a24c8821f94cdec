package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// ListKeys returns a page of the keys that start with prefix, in ascending byte order:
// those after after ("" for the first page), at most limit (1..1000). more reports that
// keys beyond the page exist; pass the page's last key as the next call's after.
func (c *KeyValue) ListKeys(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpListKeys, "prefix", prefix, "after", after); err != nil {
		return nil, false, err
	}
	var r protocol.KVListKeysReply
	err := c.t.call(ctx, protocol.KeyValue, protocol.OpListKeys, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return appendJSON(b, protocol.KVListKeysRequest{Ctx: protocol.CtxOf(&rc), Prefix: prefix, Limit: limit, After: after})
	}, &r)
	if err != nil {
		return nil, false, err
	}
	if r.Keys == nil {
		r.Keys = []string{}
	}
	return r.Keys, r.NextAfter != "", nil
}

// TTL returns the time key still lives, in whole seconds rounded up: 0 when it never
// expires. A missing key is found=false, not an error.
func (c *KeyValue) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpGetTTL, "key", key); err != nil {
		return 0, false, err
	}
	var r protocol.KVGetTTLReply
	err := c.t.call(ctx, protocol.KeyValue, protocol.OpGetTTL, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVKeyRequest{Ctx: protocol.CtxOf(&rc), Key: key}.AppendJSON(b)
	}, &r)
	if err != nil || !r.Found {
		return 0, false, err
	}
	return time.Duration(r.TTLSeconds) * time.Second, true, nil
}

// appendJSON appends v as encoding/json writes it, for the requests that have no
// appender of their own (calls rare enough that reflection costs nothing that matters).
func appendJSON(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}
