// Package objtest is the contract of objectstorage.Store: every backend and the client
// SDK's object_storage client run it, so they all behave alike on every operation, on
// missing objects, on listing and on unusual or invalid names.
package objtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/abi-engine/engine/primaries/keyvalue/kvtest"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// Clock is kvtest's settable clock, for backends that take their time from a
// func() time.Time.
type Clock = kvtest.Clock

// NewClock returns a clock at a fixed instant with a fraction of a second, so a
// modification time that loses precision on its way shows.
func NewClock() *Clock { return kvtest.NewClock() }

// Option adjusts how Run tests a store.
type Option func(*config)

type config struct {
	clock    *Clock
	maxBytes int
}

// WithClock tells Run that the stores read their time from clock, so modification times
// are checked exactly.
func WithClock(clock *Clock) Option { return func(c *config) { c.clock = clock } }

// WithMaxObjectBytes bounds the largest object Run stores (default 512 KiB); a store
// that carries objects over a single NATS message needs it below the broker's limit.
func WithMaxObjectBytes(n int) Option { return func(c *config) { c.maxBytes = n } }

// opTimeout bounds each store call, so a hung backend fails the test instead of
// hanging it.
const opTimeout = 30 * time.Second

// Run runs the contract. newStore returns a new, empty store for each subtest and
// arranges its cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) objectstorage.Store, opts ...Option) {
	cfg := config{maxBytes: 512 << 10}
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		run  func(*testing.T, objectstorage.Store)
	}{
		{"Missing", testMissing},
		{"PutGet", func(t *testing.T, s objectstorage.Store) { testPutGet(t, s, cfg.maxBytes) }},
		{"Delete", testDelete},
		{"List", testList},
		{"ListRecursive", testListRecursive},
		{"Metadata", func(t *testing.T, s objectstorage.Store) { testMetadata(t, s, cfg.clock) }},
		{"UnusualNames", testUnusualNames},
		{"InvalidNames", testInvalidNames},
		{"ConcurrentPuts", testConcurrentPuts},
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

func check(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantCode(t *testing.T, what string, err error, code protocol.Code) {
	t.Helper()
	if !errors.Is(err, &protocol.Error{Code: code}) {
		t.Errorf("%s: err = %v, want %s", what, err, code)
	}
}

func wantContent(t *testing.T, s objectstorage.Store, prefix, key string, want []byte) {
	t.Helper()
	got, err := s.GetObject(ctx(t), prefix, key)
	check(t, fmt.Sprintf("GetObject(%q, %.40q)", prefix, key), err)
	if !bytes.Equal(got, want) {
		t.Fatalf("GetObject(%q, %.40q) = %d bytes %.40q, want %d bytes %.40q", prefix, key, len(got), got, len(want), want)
	}
	md, err := s.GetObjectMetadata(ctx(t), prefix, key)
	check(t, "GetObjectMetadata", err)
	if md.Size != int64(len(want)) {
		t.Fatalf("GetObjectMetadata(%q, %.40q).Size = %d, want %d", prefix, key, md.Size, len(want))
	}
}

func wantMissing(t *testing.T, s objectstorage.Store, prefix, key string) {
	t.Helper()
	_, err := s.GetObject(ctx(t), prefix, key)
	wantCode(t, fmt.Sprintf("GetObject(%q, %.40q)", prefix, key), err, protocol.NotFound)
	_, err = s.GetObjectMetadata(ctx(t), prefix, key)
	wantCode(t, fmt.Sprintf("GetObjectMetadata(%q, %.40q)", prefix, key), err, protocol.NotFound)
}

func wantList(t *testing.T, s objectstorage.Store, prefix string, want ...string) {
	t.Helper()
	got, err := s.ListObjects(ctx(t), prefix)
	check(t, fmt.Sprintf("ListObjects(%q)", prefix), err)
	if want == nil {
		want = []string{}
	}
	if got == nil || !slices.Equal(got, want) {
		t.Fatalf("ListObjects(%q) = %#v, want %#v", prefix, got, want)
	}
}

func testMissing(t *testing.T, s objectstorage.Store) {
	wantMissing(t, s, "", "nothing")
	wantMissing(t, s, "no/such/prefix", "nothing")
	wantCode(t, "DeleteObject of a missing object", s.DeleteObject(ctx(t), "p", "nothing"), protocol.NotFound)
	wantList(t, s, "")
	wantList(t, s, "no/such/prefix")
}

func testPutGet(t *testing.T, s objectstorage.Store, maxBytes int) {
	check(t, "PutObject", s.PutObject(ctx(t), "docs", "a.txt", []byte("hello")))
	wantContent(t, s, "docs", "a.txt", []byte("hello"))
	check(t, "PutObject (overwrite)", s.PutObject(ctx(t), "docs", "a.txt", []byte("bye")))
	wantContent(t, s, "docs", "a.txt", []byte("bye"))

	check(t, "PutObject (top level)", s.PutObject(ctx(t), "", "top", []byte("t")))
	wantContent(t, s, "", "top", []byte("t"))
	check(t, "PutObject (empty)", s.PutObject(ctx(t), "docs", "empty", []byte{}))
	wantContent(t, s, "docs", "empty", []byte{})

	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	check(t, "PutObject (binary)", s.PutObject(ctx(t), "bin", "all-bytes", binary))
	wantContent(t, s, "bin", "all-bytes", binary)

	big := bytes.Repeat([]byte("0123456789abcdef"), maxBytes/16)
	check(t, "PutObject (big)", s.PutObject(ctx(t), "big", "object", big))
	wantContent(t, s, "big", "object", big)

	// The same key under two prefixes is two objects.
	check(t, "PutObject", s.PutObject(ctx(t), "a", "same", []byte("under a")))
	check(t, "PutObject", s.PutObject(ctx(t), "a/b", "same", []byte("under a/b")))
	wantContent(t, s, "a", "same", []byte("under a"))
	wantContent(t, s, "a/b", "same", []byte("under a/b"))

	// The store keeps its own copy.
	buf := []byte("original")
	check(t, "PutObject", s.PutObject(ctx(t), "copy", "k", buf))
	copy(buf, "XXXXXXXX")
	got, err := s.GetObject(ctx(t), "copy", "k")
	check(t, "GetObject", err)
	copy(got, "YYYYYYYY")
	wantContent(t, s, "copy", "k", []byte("original"))
}

func testDelete(t *testing.T, s objectstorage.Store) {
	check(t, "PutObject", s.PutObject(ctx(t), "p", "k", []byte("v")))
	check(t, "PutObject", s.PutObject(ctx(t), "p", "other", []byte("w")))
	check(t, "DeleteObject", s.DeleteObject(ctx(t), "p", "k"))
	wantMissing(t, s, "p", "k")
	wantContent(t, s, "p", "other", []byte("w"))
	wantList(t, s, "p", "other")
	wantCode(t, "second DeleteObject", s.DeleteObject(ctx(t), "p", "k"), protocol.NotFound)
	check(t, "PutObject after delete", s.PutObject(ctx(t), "p", "k", []byte("again")))
	wantContent(t, s, "p", "k", []byte("again"))
}

func testList(t *testing.T, s objectstorage.Store) {
	for _, name := range [][2]string{
		{"photos", "b.jpg"}, {"photos", "a.jpg"}, {"photos", "C.jpg"},
		{"photos/2024", "x.jpg"}, {"photos/2024/june", "y.jpg"},
		{"", "root.txt"}, {"photosynthesis", "leaf"},
	} {
		check(t, "PutObject", s.PutObject(ctx(t), name[0], name[1], []byte(name[1])))
	}
	// Only the keys directly under the prefix, sorted by bytes; no sub-prefixes, no
	// neighbours that merely start with the same letters.
	wantList(t, s, "photos", "C.jpg", "a.jpg", "b.jpg")
	wantList(t, s, "photos/2024", "x.jpg")
	wantList(t, s, "photos/2024/june", "y.jpg")
	wantList(t, s, "", "root.txt")
	wantList(t, s, "photosynthesis", "leaf")
	wantList(t, s, "phot")
	check(t, "DeleteObject", s.DeleteObject(ctx(t), "photos/2024", "x.jpg"))
	wantList(t, s, "photos/2024")
	wantList(t, s, "photos/2024/june", "y.jpg")
}

func testMetadata(t *testing.T, s objectstorage.Store, clock *Clock) {
	before := time.Now()
	check(t, "PutObject", s.PutObject(ctx(t), "m", "k", []byte("12345")))
	md, err := s.GetObjectMetadata(ctx(t), "m", "k")
	check(t, "GetObjectMetadata", err)
	if md.Size != 5 {
		t.Fatalf("Size = %d, want 5", md.Size)
	}
	if clock != nil {
		if !md.ModifiedAt.Equal(clock.Now()) {
			t.Fatalf("ModifiedAt = %s, want the clock's %s", md.ModifiedAt, clock.Now())
		}
		clock.Advance(time.Hour)
		check(t, "PutObject", s.PutObject(ctx(t), "m", "k", []byte("123")))
		md2, err := s.GetObjectMetadata(ctx(t), "m", "k")
		check(t, "GetObjectMetadata", err)
		if !md2.ModifiedAt.Equal(clock.Now()) || md2.Size != 3 {
			t.Fatalf("after overwrite: %+v, want size 3 at %s", md2, clock.Now())
		}
		return
	}
	// A real clock: the time is the write's, give or take the clocks of the machines
	// involved (generous: this checks the field is meaningful, not the machine's speed).
	if d := md.ModifiedAt.Sub(before); d < -time.Minute || d > time.Minute {
		t.Fatalf("ModifiedAt = %s, written at about %s", md.ModifiedAt, before)
	}
	check(t, "PutObject", s.PutObject(ctx(t), "m", "k", []byte("123")))
	md2, err := s.GetObjectMetadata(ctx(t), "m", "k")
	check(t, "GetObjectMetadata", err)
	if md2.Size != 3 || md2.ModifiedAt.Before(md.ModifiedAt) {
		t.Fatalf("after overwrite: %+v, before it %+v", md2, md)
	}
}

func testUnusualNames(t *testing.T, s objectstorage.Store) {
	names := [][2]string{
		{"with space", "file name.txt"},
		{"dots.in.prefix", "..."},
		{".hidden", ".key"},
		{"unicode/ключ/键", "🔑.bin"},
		{"a", "b..c"},
		{"back\\slash", "back\\slash"},
		{"$KV/_INBOX", "*"},
		{"gt", ">"},
		{"percent%2F", "%2F"},
		{"tab\there", "new\nline"},
		{strings.Repeat("p", objectstorage.MaxSegmentBytes), strings.Repeat("k", objectstorage.MaxSegmentBytes)},
		{strings.Repeat("€", objectstorage.MaxSegmentBytes/3), strings.Repeat("€", objectstorage.MaxSegmentBytes/3)},
		{"Case", "Key"}, {"case", "key"},
	}
	for i, n := range names {
		check(t, fmt.Sprintf("PutObject(%.40q, %.40q)", n[0], n[1]), s.PutObject(ctx(t), n[0], n[1], fmt.Appendf(nil, "v%d", i)))
	}
	for i, n := range names {
		wantContent(t, s, n[0], n[1], fmt.Appendf(nil, "v%d", i))
		wantList(t, s, n[0], n[1])
	}
	for _, n := range names {
		check(t, "DeleteObject", s.DeleteObject(ctx(t), n[0], n[1]))
		wantMissing(t, s, n[0], n[1])
	}
}

func testInvalidNames(t *testing.T, s objectstorage.Store) {
	badPrefixes := map[string]string{
		"leading slash":   "/abs",
		"trailing slash":  "dir/",
		"double slash":    "a//b",
		"dot-dot":         "../escape",
		"inner dot-dot":   "a/../../escape",
		"dot":             "a/./b",
		"long segment":    strings.Repeat("p", objectstorage.MaxSegmentBytes+1),
		"long prefix":     strings.Repeat("p/", objectstorage.MaxPrefixBytes/2+1) + "p",
		"invalid UTF-8":   "bad\xff",
		"NUL":             "nul\x00",
		"only slash":      "/",
		"only dot-dot":    "..",
		"trailing dotdot": "a/..",
	}
	for name, p := range badPrefixes {
		wantCode(t, "PutObject with prefix "+name, s.PutObject(ctx(t), p, "k", []byte("v")), protocol.InvalidArgument)
		_, err := s.GetObject(ctx(t), p, "k")
		wantCode(t, "GetObject with prefix "+name, err, protocol.InvalidArgument)
		_, err = s.ListObjects(ctx(t), p)
		wantCode(t, "ListObjects with prefix "+name, err, protocol.InvalidArgument)
	}
	badKeys := map[string]string{
		"empty":         "",
		"slash":         "a/b",
		"dot-dot":       "..",
		"dot":           ".",
		"long":          strings.Repeat("k", objectstorage.MaxSegmentBytes+1),
		"invalid UTF-8": "bad\xffkey",
		"NUL":           "nul\x00",
	}
	for name, k := range badKeys {
		wantCode(t, "PutObject with key "+name, s.PutObject(ctx(t), "p", k, []byte("v")), protocol.InvalidArgument)
		_, err := s.GetObject(ctx(t), "p", k)
		wantCode(t, "GetObject with key "+name, err, protocol.InvalidArgument)
		wantCode(t, "DeleteObject with key "+name, s.DeleteObject(ctx(t), "p", k), protocol.InvalidArgument)
		_, err = s.GetObjectMetadata(ctx(t), "p", k)
		wantCode(t, "GetObjectMetadata with key "+name, err, protocol.InvalidArgument)
	}
	// Nothing was written, in particular nothing outside the store.
	wantList(t, s, "")
	wantList(t, s, "p")
}

// testConcurrentPuts checks that a reader never sees a partly written object.
func testConcurrentPuts(t *testing.T, s objectstorage.Store) {
	a, b := bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 64<<10)
	check(t, "PutObject", s.PutObject(ctx(t), "race", "k", a))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Go(func() {
			v := a
			if i%2 == 1 {
				v = b
			}
			for range 4 {
				if err := s.PutObject(ctx(t), "race", "k", v); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range 4 {
				got, err := s.GetObject(ctx(t), "race", "k")
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
					errs <- fmt.Errorf("read a torn object of %d bytes", len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
