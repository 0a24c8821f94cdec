package client

import (
	"context"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// KeyValue is the typed client of the keyvalue service. It has the method set of the
// engine's keyvalue backends (keyvalue.Store), so a client-role engine hands it to its
// modules in their place. Errors are *CallError values wrapping a *protocol.Error.
type KeyValue struct{ t *Transport }

// NewKeyValue returns a keyvalue client over t.
func NewKeyValue(t *Transport) *KeyValue { return &KeyValue{t: t} }

// Get returns the value of key; a missing key is found=false, not an error.
func (c *KeyValue) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpGet, "key", key); err != nil {
		return nil, false, err
	}
	var r protocol.KVGetReply
	err := c.t.call(ctx, protocol.KeyValue, protocol.OpGet, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVKeyRequest{Ctx: protocol.CtxOf(&rc), Key: key}.AppendJSON(b)
	}, &r)
	if err != nil || !r.Found {
		return nil, false, err
	}
	if r.Value == nil {
		r.Value = []byte{}
	}
	return r.Value, true, nil
}

// Set stores value under key; ttl 0 means no expiry.
func (c *KeyValue) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpSet, "key", key); err != nil {
		return err
	}
	return c.t.call(ctx, protocol.KeyValue, protocol.OpSet, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVSetRequest{Ctx: protocol.CtxOf(&rc), Key: key, Value: nonNil(value), TTLSeconds: ttl.Seconds()}.AppendJSON(b)
	}, nil)
}

// SetIfNotExists stores value only if key is absent and reports whether it did.
func (c *KeyValue) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpSetIfNotExists, "key", key); err != nil {
		return false, err
	}
	var r protocol.KVSetReply
	err := c.t.call(ctx, protocol.KeyValue, protocol.OpSetIfNotExists, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVSetRequest{Ctx: protocol.CtxOf(&rc), Key: key, Value: nonNil(value), TTLSeconds: ttl.Seconds()}.AppendJSON(b)
	}, &r)
	return r.Set, err
}

// Delete removes key and reports whether it existed.
func (c *KeyValue) Delete(ctx context.Context, key string) (bool, error) {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpDelete, "key", key); err != nil {
		return false, err
	}
	var r protocol.KVDeleteReply
	err := c.t.call(ctx, protocol.KeyValue, protocol.OpDelete, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVKeyRequest{Ctx: protocol.CtxOf(&rc), Key: key}.AppendJSON(b)
	}, &r)
	return r.Deleted, err
}

// DeleteIfValueMatches removes key only if it holds value and reports whether it did.
func (c *KeyValue) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpDeleteIfValueMatches, "key", key); err != nil {
		return false, err
	}
	var r protocol.KVDeleteReply
	err := c.t.call(ctx, protocol.KeyValue, protocol.OpDeleteIfValueMatches, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVValueRequest{Ctx: protocol.CtxOf(&rc), Key: key, Value: nonNil(value)}.AppendJSON(b)
	}, &r)
	return r.Deleted, err
}

// Exists reports whether key holds a value.
func (c *KeyValue) Exists(ctx context.Context, key string) (bool, error) {
	if err := c.t.checkNames(protocol.KeyValue, protocol.OpExists, "key", key); err != nil {
		return false, err
	}
	var r protocol.KVExistsReply
	err := c.t.call(ctx, protocol.KeyValue, protocol.OpExists, func(b []byte, rc protocol.RequestContext) ([]byte, error) {
		return protocol.KVKeyRequest{Ctx: protocol.CtxOf(&rc), Key: key}.AppendJSON(b)
	}, &r)
	return r.Exists, err
}

// nonNil makes a nil value travel as "" (an empty value) rather than null, which an
// engine would have to guess about.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
