package kvtest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/protocol"
)

// The contract of ListKeys and TTL: what a store tells about its keys.

func listKeys(t *testing.T, s keyvalue.Store, prefix, after string, limit int) ([]string, bool) {
	t.Helper()
	keys, more, err := s.ListKeys(ctx(t), prefix, after, limit)
	check(t, "ListKeys", err)
	return keys, more
}

func wantPage(t *testing.T, s keyvalue.Store, prefix, after string, limit int, want []string, wantMore bool) {
	t.Helper()
	got, more := listKeys(t, s, prefix, after, limit)
	if !slices.Equal(got, want) || more != wantMore {
		t.Fatalf("ListKeys(%q, after %q, limit %d) = %q more %v, want %q more %v", prefix, after, limit, got, more, want, wantMore)
	}
}

// testListKeys: live keys only, in byte order (so "z" before "é"), a prefix that is a
// key itself, pages that cut exactly and strictly after their after, and limits
// outside 1..1000 refused with the Python engine's message.
func testListKeys(t *testing.T, s keyvalue.Store) {
	wantPage(t, s, "", "", 10, nil, false)
	for _, k := range []string{"c", "b/2", "é", "a", "b/1", "bz", "b", "b/3", "gone"} {
		check(t, "Set", s.Set(ctx(t), k, []byte("v"), 0))
	}
	deleted, err := s.Delete(ctx(t), "gone")
	check(t, "Delete", err)
	if !deleted {
		t.Fatal("Delete did not delete")
	}
	all := []string{"a", "b", "b/1", "b/2", "b/3", "bz", "c", "é"}
	wantPage(t, s, "", "", keyvalue.MaxListLimit, all, false)
	wantPage(t, s, "b", "", 10, []string{"b", "b/1", "b/2", "b/3", "bz"}, false)
	wantPage(t, s, "b/", "", 2, []string{"b/1", "b/2"}, true)
	wantPage(t, s, "b/", "b/2", 2, []string{"b/3"}, false)
	wantPage(t, s, "b/", "", 3, []string{"b/1", "b/2", "b/3"}, false)
	wantPage(t, s, "b/", "a", 10, []string{"b/1", "b/2", "b/3"}, false)
	wantPage(t, s, "", "bz", 10, []string{"c", "é"}, false)
	wantPage(t, s, "nothing", "", 10, nil, false)

	// Paging through everything one key at a time visits every key once.
	var seen []string
	for after := ""; ; {
		page, more := listKeys(t, s, "", after, 1)
		seen = append(seen, page...)
		if !more {
			break
		}
		after = page[len(page)-1]
	}
	if !slices.Equal(seen, all) {
		t.Fatalf("paging by 1 saw %q, want %q", seen, all)
	}

	for _, limit := range []int{0, -1, keyvalue.MaxListLimit + 1} {
		_, _, err := s.ListKeys(ctx(t), "", "", limit)
		var pe *protocol.Error
		if !errors.Is(err, protocol.ErrInvalidArgument) || !errors.As(err, &pe) || !strings.Contains(pe.Message, "limit must be between 1 and 1000") {
			t.Fatalf("ListKeys limit %d: %v, want INVALID_ARGUMENT naming the limit", limit, err)
		}
	}
}

// testTTLOf: no TTL is 0, a missing or deleted key is not found, a TTL counts down
// (whole seconds rounded up are allowed: the JSON protocol reports them).
func testTTLOf(t *testing.T, s keyvalue.Store, clock *Clock) {
	ttlOf := func(key string) (time.Duration, bool) {
		t.Helper()
		ttl, found, err := s.TTL(ctx(t), key)
		check(t, "TTL", err)
		return ttl, found
	}
	if _, found := ttlOf("missing"); found {
		t.Fatal("TTL of a missing key: found")
	}
	check(t, "Set", s.Set(ctx(t), "forever", []byte("v"), 0))
	if ttl, found := ttlOf("forever"); !found || ttl != 0 {
		t.Fatalf("TTL of a key without one = %s found %v, want 0 found", ttl, found)
	}
	const ttl = time.Minute
	check(t, "Set", s.Set(ctx(t), "expiring", []byte("v"), ttl))
	if got, found := ttlOf("expiring"); !found || got <= 0 || got > ttl {
		t.Fatalf("TTL right after a set with %s = %s found %v", ttl, got, found)
	}
	// A set without a TTL clears it.
	check(t, "Set", s.Set(ctx(t), "cleared", []byte("v"), ttl))
	check(t, "Set", s.Set(ctx(t), "cleared", []byte("w"), 0))
	if got, found := ttlOf("cleared"); !found || got != 0 {
		t.Fatalf("TTL after a set without one = %s found %v, want 0", got, found)
	}
	_, err := s.Delete(ctx(t), "forever")
	check(t, "Delete", err)
	if _, found := ttlOf("forever"); found {
		t.Fatal("TTL of a deleted key: found")
	}
	if clock == nil {
		return
	}
	clock.Advance(20*time.Second + 500*time.Millisecond)
	if got, found := ttlOf("expiring"); !found || got < 39*time.Second+500*time.Millisecond || got > 40*time.Second {
		t.Fatalf("TTL 20.5 s after a set with %s = %s found %v, want 39.5 s (or 40 s rounded up)", ttl, got, found)
	}
	clock.Advance(39*time.Second + 499*time.Millisecond)
	if got, found := ttlOf("expiring"); !found || got <= 0 || got > time.Second {
		t.Fatalf("TTL 1 ms before expiry = %s found %v, want above 0", got, found)
	}
	clock.Advance(time.Millisecond)
	if _, found := ttlOf("expiring"); found {
		t.Fatal("TTL of an expired key: found")
	}
	check(t, "Set", s.Set(ctx(t), "lapsed", []byte("v"), time.Second))
	clock.Advance(time.Second)
	if keys, _ := listKeys(t, s, "", "", 10); slices.Contains(keys, "lapsed") {
		t.Fatalf("ListKeys lists an expired key: %q", keys)
	}
}
