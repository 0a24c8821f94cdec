package jetstream

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/primaries/internal/jsepoch"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

// The KV API's headers, which the backend writes itself (nats.go does not export them).
const (
	kvOperation = "KV-Operation"
	kvPurge     = "PURGE"
	kvDelete    = "DEL"
)

// ttlSeconds rounds a TTL up to the server's whole seconds.
func ttlSeconds(ttl time.Duration) time.Duration {
	return (ttl + time.Second - 1) / time.Second * time.Second
}

// Set stores value; ttl 0 means no expiry. One message to the key's subject, which
// carries the epoch check.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return err
	}
	conflict, err := s.write(ctx, "set", key, func(tok jsepoch.Token) error {
		m := &nats.Msg{Subject: s.prefix + encode(key), Data: value, Header: nats.Header{}}
		if ttl > 0 {
			m.Header.Set(js.MsgTTLHeader, ttlSeconds(ttl).String())
		}
		s.carry(m, tok)
		_, err := jsdomain.Publish(ctx, s.js, m)
		return err
	})
	if conflict { // the epoch check is the message's only expectation; it cannot be this
		return protocol.Refused("keyvalue set %.64q: JetStream bucket %s refused the write although its epoch record is current, so it stored nothing", key, s.bucket)
	}
	return err
}

// SetIfNotExists stores value only if key is absent (never set, deleted or expired): a
// batch of the value, expecting the key's last revision (none, or the marker a delete
// or an expiry left), and the epoch-checked fence message.
func (s *Store) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := keyvalue.CheckSet(key, ttl); err != nil {
		return false, err
	}
	var expect uint64 // the key's revision the value goes over: none
	for range maxCASAttempts {
		conflict, err := s.write(ctx, "set_if_not_exists", key, func(tok jsepoch.Token) error {
			m := &nats.Msg{Subject: s.prefix + encode(key), Data: value, Header: nats.Header{}}
			if ttl > 0 {
				m.Header.Set(js.MsgTTLHeader, ttlSeconds(ttl).String())
			}
			return s.batch(ctx, m, expect, tok)
		})
		if err != nil || !conflict {
			return err == nil, err
		}
		rev, live, err := s.last(ctx, key)
		if err != nil {
			return false, s.readError("set_if_not_exists", key, err)
		}
		if live {
			return false, nil
		}
		expect = rev
	}
	return false, protocol.Errorf(protocol.Conflict, "keyvalue set_if_not_exists %.64q: the key changed %d times while setting it", key, maxCASAttempts)
}

// last reads the last message of key, markers included: its revision (0: none) and
// whether it is a value rather than the marker of a delete, purge or expiry.
func (s *Store) last(ctx context.Context, key string) (rev uint64, live bool, err error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, s.prefix+encode(key))
	if errors.Is(err, js.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	op := m.Header.Get(kvOperation)
	marker := op == kvDelete || op == kvPurge || m.Header.Get(js.MarkerReasonHeader) != ""
	return m.Sequence, !marker, nil
}

// Delete removes key and reports whether it had a value.
func (s *Store) Delete(ctx context.Context, key string) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	return s.deleteIf(ctx, "delete", key, func(js.KeyValueEntry) bool { return true })
}

// DeleteIfValueMatches removes key only if its value equals value.
func (s *Store) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	if err := keyvalue.CheckKey(key); err != nil {
		return false, err
	}
	return s.deleteIf(ctx, "delete_if_value_matches", key, func(e js.KeyValueEntry) bool {
		return bytes.Equal(e.Value(), value)
	})
}

// deleteIf reads key and, if match accepts its entry, purges exactly that revision: a
// batch of the purge marker (as the KV API writes it, with the marker TTL) expecting
// the entry's revision, and the epoch-checked fence message. A conflict of the key
// means another writer changed it in between: read again.
func (s *Store) deleteIf(ctx context.Context, op, key string, match func(js.KeyValueEntry) bool) (bool, error) {
	for range maxCASAttempts {
		e, err := s.entry(ctx, key)
		if err != nil || e == nil || !match(e) {
			return false, err
		}
		conflict, err := s.write(ctx, op, key, func(tok jsepoch.Token) error {
			m := &nats.Msg{Subject: s.prefix + encode(key), Header: nats.Header{}}
			m.Header.Set(kvOperation, kvPurge)
			m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
			m.Header.Set(js.MsgTTLHeader, markerTTL.String())
			return s.batch(ctx, m, e.Revision(), tok)
		})
		if err != nil || !conflict {
			return err == nil, err
		}
	}
	return false, protocol.Errorf(protocol.Conflict, "keyvalue %s %.64q: the key changed %d times while deleting it", op, key, maxCASAttempts)
}

// batch writes m, expecting its subject's last revision to be expect (0: none),
// atomically with the fence message, which carries the epoch check: the server checks
// both and stores both or neither. (A single message has room for one expectation, and
// the end-of-batch commit, which is not stored, has its expectations ignored, so the
// check rides on a stored message.)
func (s *Store) batch(ctx context.Context, m *nats.Msg, expect uint64, tok jsepoch.Token) error {
	m.Header.Set(js.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect, 10))
	fence := &nats.Msg{Subject: s.prefix + fenceKey, Header: nats.Header{}}
	s.carryAs(fence, tok, m.Subject)
	return s.publishBatch(ctx, []*nats.Msg{m, fence})
}

// sendBatch publishes an atomic batch and waits for the commit's answer only: the
// server answers the whole batch there, and waiting for the first message too would
// cost a round trip.
func (s *Store) sendBatch(ctx context.Context, msgs []*nats.Msg) error {
	_, err := jsdomain.Batch(ctx, s.js, msgs, jetstreamext.BatchFlowControl{AckFirst: false})
	return err
}
