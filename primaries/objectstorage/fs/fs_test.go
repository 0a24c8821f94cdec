package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/primaries/objectstorage/objtest"
	"github.com/abi-engine/engine/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T, root string) *Store {
	t.Helper()
	s, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	objtest.Run(t, func(t *testing.T) objectstorage.Store { return newStore(t, t.TempDir()) })
}

// No name, however crafted, reads or writes outside the root.
func TestPathTraversalIsRefused(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	s := newStore(t, root)
	secret := filepath.Join(parent, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct{ prefix, key string }{
		{"..", "secret"}, {"../..", "secret"}, {"a/../..", "secret"}, {"/" + parent, "secret"},
		{"", ".."}, {"..", ".."}, {"objects/..", "x"}, {"", "../secret"},
	} {
		if err := s.PutObject(ctx, c.prefix, c.key, []byte("x")); !errors.Is(err, protocol.ErrInvalidArgument) {
			t.Errorf("PutObject(%q, %q) = %v, want INVALID_ARGUMENT", c.prefix, c.key, err)
		}
		if _, err := s.GetObject(ctx, c.prefix, c.key); !errors.Is(err, protocol.ErrInvalidArgument) {
			t.Errorf("GetObject(%q, %q) = %v, want INVALID_ARGUMENT", c.prefix, c.key, err)
		}
		if err := s.DeleteObject(ctx, c.prefix, c.key); !errors.Is(err, protocol.ErrInvalidArgument) {
			t.Errorf("DeleteObject(%q, %q) = %v, want INVALID_ARGUMENT", c.prefix, c.key, err)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "secret" {
		t.Fatalf("the file outside the root changed: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 2 {
		t.Fatalf("%d entries next to the root, want root and secret", len(entries))
	}
}

// An object cannot take the name of a prefix with objects under it, nor the reverse.
func TestFileAndDirectoryConflict(t *testing.T) {
	s := newStore(t, t.TempDir())
	ctx := context.Background()
	if err := s.PutObject(ctx, "a/b", "c", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "a", "b", []byte("x")); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("object over a prefix: %v, want CONFLICT", err)
	}
	if err := s.PutObject(ctx, "a/b/c", "d", []byte("x")); !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("prefix through an object: %v, want CONFLICT", err)
	}
	if _, err := s.GetObject(ctx, "a", "b"); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("a prefix read as an object: %v, want NOT_FOUND", err)
	}
}

// Deleting the last object of a prefix removes its directories; data survives a new
// store on the same root.
func TestDeleteCleansUpAndDataPersists(t *testing.T) {
	root := t.TempDir()
	s := newStore(t, root)
	ctx := context.Background()
	if err := s.PutObject(ctx, "x/y/z", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "keep", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if b, err := newStore(t, root).GetObject(ctx, "keep", "k"); err != nil || string(b) != "v" {
		t.Fatalf("reopened store: %q %v", b, err)
	}
	if err := s.DeleteObject(ctx, "x/y/z", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "objects", "x")); !os.IsNotExist(err) {
		t.Fatalf("empty prefix directories left: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "tmp")); len(entries) != 0 {
		t.Fatalf("%d temporary files left", len(entries))
	}
}

func TestLocalStorage(t *testing.T) {
	root := t.TempDir()
	if got := newStore(t, root).LocalStorage(); got != "files under "+root {
		t.Fatalf("LocalStorage = %q", got)
	}
}
