// Package kvtest is the contract of keyvalue.Store: every backend and the client SDK's
// keyvalue client run it, so they all behave alike on every operation, on missing keys,
// on TTLs, on conditional writes and on unusual keys.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

// Clock is a settable clock for backends that take their time from a func() time.Time:
// pass Now to the backend and the Clock to Run, and the TTL tests advance it instead
// of waiting. objtest uses the same clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Option adjusts how Run tests a store.
type Option func(*config)

type config struct {
	clock      *Clock
	realTTL    time.Duration
	expiryWait time.Duration
}

// WithClock tells Run that the stores read their time from clock, so TTLs are tested by
// advancing it.
func WithClock(clock *Clock) Option { return func(c *config) { c.clock = clock } }

// WithRealTTL sets the TTL used when the store's time cannot be injected (default 1s,
// the smallest JetStream accepts) and how long to wait at most for it to expire
// (default 20s: expiry runs on the backend's schedule, not ours).
func WithRealTTL(ttl, maxWait time.Duration) Option {
	return func(c *config) { c.realTTL, c.expiryWait = ttl, maxWait }
}

// opTimeout bounds each store call, so a hung backend fails the test instead of
// hanging it.
const opTimeout = 30 * time.Second

// Run runs the contract. newStore returns a new, empty store for each subtest and
// arranges its cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) keyvalue.Store, opts ...Option) {
	cfg := config{realTTL: time.Second, expiryWait: 20 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		run  func(*testing.T, keyvalue.Store)
	}{
		{"MissingKeys", testMissing},
		{"SetGet", testSetGet},
		{"SetIfNotExists", testSetIfNotExists},
		{"Delete", testDelete},
		{"DeleteIfValueMatches", testDeleteIfValueMatches},
		{"UnusualKeys", testUnusualKeys},
		{"InvalidInput", testInvalid},
		{"ConcurrentConditionalWrites", testConcurrent},
		{"ListKeys", testListKeys},
		{"KeyTTL", func(t *testing.T, s keyvalue.Store) { testTTLOf(t, s, cfg.clock) }},
		{"TTL", func(t *testing.T, s keyvalue.Store) {
			if cfg.clock != nil {
				testTTLClock(t, s, cfg.clock)
				return
			}
			testTTLReal(t, s, cfg.realTTL, cfg.expiryWait)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return c
}

// check fails the test on an unexpected error.
func check(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantValue(t *testing.T, s keyvalue.Store, key string, want []byte) {
	t.Helper()
	got, found, err := s.Get(ctx(t), key)
	check(t, fmt.Sprintf("Get(%.40q)", key), err)
	if !found {
		t.Fatalf("Get(%.40q): not found, want %q", key, want)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%.40q) = %q, want %q", key, got, want)
	}
	exists, err := s.Exists(ctx(t), key)
	check(t, "Exists", err)
	if !exists {
		t.Fatalf("Exists(%.40q) = false after Get found it", key)
	}
}

func wantMissing(t *testing.T, s keyvalue.Store, key string) {
	t.Helper()
	got, found, err := s.Get(ctx(t), key)
	check(t, fmt.Sprintf("Get(%.40q)", key), err)
	if found || got != nil {
		t.Fatalf("Get(%.40q) = %q, found=%v; want not found", key, got, found)
	}
	exists, err := s.Exists(ctx(t), key)
	check(t, "Exists", err)
	if exists {
		t.Fatalf("Exists(%.40q) = true for a missing key", key)
	}
}

func testMissing(t *testing.T, s keyvalue.Store) {
	wantMissing(t, s, "nothing-here")
	deleted, err := s.Delete(ctx(t), "nothing-here")
	check(t, "Delete", err)
	if deleted {
		t.Fatal("Delete of a missing key reported deleted")
	}
	deleted, err = s.DeleteIfValueMatches(ctx(t), "nothing-here", []byte{})
	check(t, "DeleteIfValueMatches", err)
	if deleted {
		t.Fatal("DeleteIfValueMatches of a missing key reported deleted")
	}
	wantMissing(t, s, "nothing-here")
}

func testSetGet(t *testing.T, s keyvalue.Store) {
	check(t, "Set", s.Set(ctx(t), "k", []byte("v1"), 0))
	wantValue(t, s, "k", []byte("v1"))
	check(t, "Set (overwrite)", s.Set(ctx(t), "k", []byte("v2"), 0))
	wantValue(t, s, "k", []byte("v2"))

	check(t, "Set (empty value)", s.Set(ctx(t), "empty", []byte{}, 0))
	wantValue(t, s, "empty", []byte{})

	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	check(t, "Set (binary value)", s.Set(ctx(t), "binary", binary, 0))
	wantValue(t, s, "binary", binary)

	// The store keeps its own copy: changing the caller's slice changes nothing.
	buf := []byte("original")
	check(t, "Set", s.Set(ctx(t), "copy", buf, 0))
	copy(buf, "XXXXXXXX")
	wantValue(t, s, "copy", []byte("original"))
	got, _, err := s.Get(ctx(t), "copy")
	check(t, "Get", err)
	copy(got, "YYYYYYYY")
	wantValue(t, s, "copy", []byte("original"))

	big := bytes.Repeat([]byte("0123456789abcdef"), 16*1024) // 256 KiB
	check(t, "Set (256 KiB value)", s.Set(ctx(t), "big", big, 0))
	wantValue(t, s, "big", big)
}

func testSetIfNotExists(t *testing.T, s keyvalue.Store) {
	set, err := s.SetIfNotExists(ctx(t), "k", []byte("first"), 0)
	check(t, "SetIfNotExists", err)
	if !set {
		t.Fatal("SetIfNotExists on a missing key did not set")
	}
	wantValue(t, s, "k", []byte("first"))
	set, err = s.SetIfNotExists(ctx(t), "k", []byte("second"), 0)
	check(t, "SetIfNotExists", err)
	if set {
		t.Fatal("SetIfNotExists on an existing key set it")
	}
	wantValue(t, s, "k", []byte("first"))

	// A deleted key is absent again.
	_, err = s.Delete(ctx(t), "k")
	check(t, "Delete", err)
	set, err = s.SetIfNotExists(ctx(t), "k", []byte("third"), 0)
	check(t, "SetIfNotExists", err)
	if !set {
		t.Fatal("SetIfNotExists after Delete did not set")
	}
	wantValue(t, s, "k", []byte("third"))
}

func testDelete(t *testing.T, s keyvalue.Store) {
	check(t, "Set", s.Set(ctx(t), "k", []byte("v"), 0))
	check(t, "Set", s.Set(ctx(t), "other", []byte("w"), 0))
	deleted, err := s.Delete(ctx(t), "k")
	check(t, "Delete", err)
	if !deleted {
		t.Fatal("Delete of an existing key reported not deleted")
	}
	wantMissing(t, s, "k")
	wantValue(t, s, "other", []byte("w"))
	deleted, err = s.Delete(ctx(t), "k")
	check(t, "Delete", err)
	if deleted {
		t.Fatal("second Delete reported deleted")
	}
	// A key can be set again after a delete.
	check(t, "Set", s.Set(ctx(t), "k", []byte("again"), 0))
	wantValue(t, s, "k", []byte("again"))
}

func testDeleteIfValueMatches(t *testing.T, s keyvalue.Store) {
	check(t, "Set", s.Set(ctx(t), "lock", []byte("owner-1"), 0))
	deleted, err := s.DeleteIfValueMatches(ctx(t), "lock", []byte("owner-2"))
	check(t, "DeleteIfValueMatches", err)
	if deleted {
		t.Fatal("DeleteIfValueMatches with another value deleted the key")
	}
	wantValue(t, s, "lock", []byte("owner-1"))
	deleted, err = s.DeleteIfValueMatches(ctx(t), "lock", []byte("owner-1x"))
	check(t, "DeleteIfValueMatches", err)
	if deleted {
		t.Fatal("DeleteIfValueMatches with a longer value deleted the key")
	}
	deleted, err = s.DeleteIfValueMatches(ctx(t), "lock", []byte("owner-1"))
	check(t, "DeleteIfValueMatches", err)
	if !deleted {
		t.Fatal("DeleteIfValueMatches with the stored value did not delete")
	}
	wantMissing(t, s, "lock")

	// The empty value matches only the empty value.
	check(t, "Set", s.Set(ctx(t), "e", []byte{}, 0))
	deleted, err = s.DeleteIfValueMatches(ctx(t), "e", []byte("x"))
	check(t, "DeleteIfValueMatches", err)
	if deleted {
		t.Fatal("DeleteIfValueMatches(x) deleted an empty value")
	}
	deleted, err = s.DeleteIfValueMatches(ctx(t), "e", []byte{})
	check(t, "DeleteIfValueMatches", err)
	if !deleted {
		t.Fatal("DeleteIfValueMatches(empty) did not delete an empty value")
	}
}

// unusualKeys are valid keys a backend with a narrow alphabet must encode.
func unusualKeys() []string {
	threeByte := strings.Repeat("€", maxKeyRunes3) + "a" // 341*3+1 = 1024 bytes
	return []string{
		"with space", " leading", "trailing ", "a.b.c", ".", "..", ".start", "end.", "a..b",
		"slash/ed/key", "/", "back\\slash", "*", ">", "a.*.>", "$KV.x", "_INBOX.x",
		"key:with:colons", "tab\there", "new\nline", "nul\x00byte", "quote\"d", "percent%20",
		"unicode-ключ-键-🔑", "É", "e\u0301", "Key", "key", "KEY",
		strings.Repeat("k", keyvalue.MaxKeyBytes), threeByte,
		"=", "-", "_", "~", "+",
	}
}

// maxKeyRunes3 is how many 3-byte runes fit in a key with one byte to spare.
const maxKeyRunes3 = (keyvalue.MaxKeyBytes - 1) / 3

func testUnusualKeys(t *testing.T, s keyvalue.Store) {
	keys := unusualKeys()
	for i, k := range keys {
		if len(k) > keyvalue.MaxKeyBytes {
			t.Fatalf("test key %d is %d bytes", i, len(k))
		}
		check(t, fmt.Sprintf("Set(%.40q)", k), s.Set(ctx(t), k, fmt.Appendf(nil, "value-%d", i), 0))
	}
	// Every key holds its own value: no two keys collide after encoding.
	for i, k := range keys {
		wantValue(t, s, k, fmt.Appendf(nil, "value-%d", i))
	}
	for i, k := range keys {
		deleted, err := s.DeleteIfValueMatches(ctx(t), k, fmt.Appendf(nil, "value-%d", i))
		check(t, "DeleteIfValueMatches", err)
		if !deleted {
			t.Fatalf("DeleteIfValueMatches(%.40q) did not delete", k)
		}
		wantMissing(t, s, k)
		set, err := s.SetIfNotExists(ctx(t), k, []byte("again"), 0)
		check(t, "SetIfNotExists", err)
		if !set {
			t.Fatalf("SetIfNotExists(%.40q) after delete did not set", k)
		}
		deleted, err = s.Delete(ctx(t), k)
		check(t, "Delete", err)
		if !deleted {
			t.Fatalf("Delete(%.40q) did not delete", k)
		}
	}
}

func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, protocol.ErrInvalidArgument) {
		t.Errorf("%s: err = %v, want INVALID_ARGUMENT", what, err)
	}
}

func testInvalid(t *testing.T, s keyvalue.Store) {
	bad := map[string]string{
		"empty key":       "",
		"1025-byte key":   strings.Repeat("k", keyvalue.MaxKeyBytes+1),
		"invalid UTF-8":   "bad\xffkey",
		"truncated UTF-8": "€"[:2],
	}
	for name, k := range bad {
		_, _, err := s.Get(ctx(t), k)
		wantInvalid(t, "Get with "+name, err)
		wantInvalid(t, "Set with "+name, s.Set(ctx(t), k, []byte("v"), 0))
		_, err = s.SetIfNotExists(ctx(t), k, []byte("v"), 0)
		wantInvalid(t, "SetIfNotExists with "+name, err)
		_, err = s.Delete(ctx(t), k)
		wantInvalid(t, "Delete with "+name, err)
		_, err = s.DeleteIfValueMatches(ctx(t), k, []byte("v"))
		wantInvalid(t, "DeleteIfValueMatches with "+name, err)
		_, err = s.Exists(ctx(t), k)
		wantInvalid(t, "Exists with "+name, err)
	}
	wantInvalid(t, "Set with a negative ttl", s.Set(ctx(t), "k", []byte("v"), -time.Second))
	_, err := s.SetIfNotExists(ctx(t), "k", []byte("v"), -time.Second)
	wantInvalid(t, "SetIfNotExists with a negative ttl", err)
	// Nothing was written by the refused calls.
	wantMissing(t, s, "k")
}

// testConcurrent checks that the conditional writes are atomic: of many callers racing
// on one key, exactly one wins.
func testConcurrent(t *testing.T, s keyvalue.Store) {
	const callers = 16
	race := func(what string, f func(i int) (bool, error)) {
		t.Helper()
		var wg sync.WaitGroup
		wins := make(chan int, callers)
		errs := make(chan error, callers)
		for i := range callers {
			wg.Go(func() {
				ok, err := f(i)
				if err != nil {
					errs <- err
				}
				if ok {
					wins <- i
				}
			})
		}
		wg.Wait()
		close(wins)
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", what, err)
		}
		if n := len(wins); n != 1 {
			t.Fatalf("%s: %d callers won, want exactly 1", what, n)
		}
	}
	race("SetIfNotExists", func(i int) (bool, error) {
		return s.SetIfNotExists(ctx(t), "contended", fmt.Appendf(nil, "%d", i), 0)
	})
	got, found, err := s.Get(ctx(t), "contended")
	check(t, "Get", err)
	if !found {
		t.Fatal("the winner's value is missing")
	}
	race("DeleteIfValueMatches", func(int) (bool, error) {
		return s.DeleteIfValueMatches(ctx(t), "contended", got)
	})
	check(t, "Set", s.Set(ctx(t), "contended", []byte("x"), 0))
	race("Delete", func(int) (bool, error) { return s.Delete(ctx(t), "contended") })
}

func testTTLClock(t *testing.T, s keyvalue.Store, clock *Clock) {
	const ttl = 10 * time.Second
	check(t, "Set with ttl", s.Set(ctx(t), "expiring", []byte("v"), ttl))
	check(t, "Set without ttl", s.Set(ctx(t), "forever", []byte("v"), 0))
	set, err := s.SetIfNotExists(ctx(t), "expiring-sine", []byte("v"), ttl)
	check(t, "SetIfNotExists with ttl", err)
	if !set {
		t.Fatal("SetIfNotExists with ttl did not set")
	}
	// Overwriting without a ttl clears the ttl; overwriting with one sets it.
	check(t, "Set", s.Set(ctx(t), "cleared", []byte("v"), ttl))
	check(t, "Set", s.Set(ctx(t), "cleared", []byte("w"), 0))
	check(t, "Set", s.Set(ctx(t), "gained", []byte("v"), 0))
	check(t, "Set", s.Set(ctx(t), "gained", []byte("w"), ttl))

	clock.Advance(ttl - time.Millisecond)
	for _, k := range []string{"expiring", "expiring-sine", "gained"} {
		wantValue(t, s, k, valueOf(k))
	}
	clock.Advance(time.Millisecond)
	for _, k := range []string{"expiring", "expiring-sine", "gained"} {
		wantMissing(t, s, k)
	}
	wantValue(t, s, "forever", []byte("v"))
	wantValue(t, s, "cleared", []byte("w"))

	// An expired key is absent to every operation.
	deleted, err := s.Delete(ctx(t), "expiring")
	check(t, "Delete", err)
	if deleted {
		t.Fatal("Delete of an expired key reported deleted")
	}
	deleted, err = s.DeleteIfValueMatches(ctx(t), "expiring-sine", []byte("v"))
	check(t, "DeleteIfValueMatches", err)
	if deleted {
		t.Fatal("DeleteIfValueMatches of an expired key reported deleted")
	}
	set, err = s.SetIfNotExists(ctx(t), "gained", []byte("new"), 0)
	check(t, "SetIfNotExists", err)
	if !set {
		t.Fatal("SetIfNotExists over an expired key did not set")
	}
	clock.Advance(100 * 365 * 24 * time.Hour)
	wantValue(t, s, "gained", []byte("new"))
	wantValue(t, s, "forever", []byte("v"))
}

func valueOf(k string) []byte {
	if k == "gained" {
		return []byte("w")
	}
	return []byte("v")
}

// testTTLReal covers backends whose clock cannot be injected: short real TTLs, and a
// bounded wait for the backend to expire them.
func testTTLReal(t *testing.T, s keyvalue.Store, ttl, maxWait time.Duration) {
	check(t, "Set", s.Set(ctx(t), "cleared", []byte("v"), ttl))
	check(t, "Set", s.Set(ctx(t), "cleared", []byte("w"), 0))
	check(t, "Set", s.Set(ctx(t), "gained", []byte("v"), 0))
	check(t, "Set", s.Set(ctx(t), "gained", []byte("w"), ttl))
	check(t, "Set with ttl", s.Set(ctx(t), "expiring", []byte("v"), ttl))
	set, err := s.SetIfNotExists(ctx(t), "expiring-sine", []byte("v"), ttl)
	check(t, "SetIfNotExists with ttl", err)
	if !set {
		t.Fatal("SetIfNotExists with ttl did not set")
	}
	check(t, "Set without ttl", s.Set(ctx(t), "forever", []byte("v"), 0))
	expiring := []string{"gained", "expiring", "expiring-sine"}

	deadline := time.Now().Add(ttl + maxWait)
	for _, k := range expiring {
		for {
			_, found, err := s.Get(ctx(t), k)
			check(t, "Get", err)
			if !found {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q (ttl %s) still there after %s", k, ttl, ttl+maxWait)
			}
			time.Sleep(50 * time.Millisecond) // the backend expires on its own schedule
		}
		wantMissing(t, s, k)
	}
	wantValue(t, s, "forever", []byte("v"))
	wantValue(t, s, "cleared", []byte("w"))
	set, err = s.SetIfNotExists(ctx(t), "expiring", []byte("new"), 0)
	check(t, "SetIfNotExists", err)
	if !set {
		t.Fatal("SetIfNotExists over an expired key did not set")
	}
	wantValue(t, s, "expiring", []byte("new"))
}
