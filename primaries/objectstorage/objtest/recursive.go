package objtest

import (
	"errors"
	"slices"
	"testing"

	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// testListRecursive: every object at any depth under the prefix, named relative to
// it and sorted; never one under a sibling prefix that merely starts alike; nothing
// once they are deleted; an invalid prefix refused.
func testListRecursive(t *testing.T, s objectstorage.Store) {
	objects := [][2]string{
		{"docs", "top.txt"}, {"docs/2024/q1", "jan.pdf"}, {"docs/2024/q2", "apr.pdf"},
		{"docs/2024", "summary.txt"}, {"docsx", "other"}, {"", "root.txt"},
	}
	for _, o := range objects {
		if err := s.PutObject(ctx(t), o[0], o[1], []byte(o[1])); err != nil {
			t.Fatalf("PutObject(%q, %q): %v", o[0], o[1], err)
		}
	}
	want := map[string][]string{
		"docs":         {"2024/q1/jan.pdf", "2024/q2/apr.pdf", "2024/summary.txt", "top.txt"},
		"docs/2024/q1": {"jan.pdf"},
		"":             {"docs/2024/q1/jan.pdf", "docs/2024/q2/apr.pdf", "docs/2024/summary.txt", "docs/top.txt", "docsx/other", "root.txt"},
		"nothing":      {},
		"docs/2024/q3": {},
	}
	for prefix, w := range want {
		got, err := s.ListObjectsRecursive(ctx(t), prefix)
		if err != nil {
			t.Fatalf("ListObjectsRecursive(%q): %v", prefix, err)
		}
		if !slices.Equal(got, w) {
			t.Fatalf("ListObjectsRecursive(%q) = %q, want %q", prefix, got, w)
		}
	}
	// The flat listing is unchanged: the direct children only.
	if got, err := s.ListObjects(ctx(t), "docs"); err != nil || !slices.Equal(got, []string{"top.txt"}) {
		t.Fatalf("ListObjects(docs) = %q, %v; want [top.txt]", got, err)
	}
	for _, o := range objects {
		if err := s.DeleteObject(ctx(t), o[0], o[1]); err != nil {
			t.Fatalf("DeleteObject(%q, %q): %v", o[0], o[1], err)
		}
	}
	if got, err := s.ListObjectsRecursive(ctx(t), "docs"); err != nil || len(got) != 0 {
		t.Fatalf("ListObjectsRecursive(docs) after deleting everything = %q, %v", got, err)
	}
	if _, err := s.ListObjectsRecursive(ctx(t), "a//b"); !errors.Is(err, protocol.ErrInvalidArgument) {
		t.Fatalf("ListObjectsRecursive(a//b): %v, want INVALID_ARGUMENT", err)
	}
}
