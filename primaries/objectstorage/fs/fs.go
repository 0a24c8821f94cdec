// Package fs is the object_storage backend on a local directory: each object is a file
// at <root>/objects/<prefix>/<key>. Data survives restarts but stays on this host.
//
// Writes go to a temporary file under <root>/tmp and are renamed into place, so a reader
// sees the old object or the new one, never part of one. Names are checked by
// objectstorage.CheckName before any path is built, so no prefix or key leaves the root.
// One limit comes from the file system: an object cannot share its name with a prefix
// that has objects under it (a file and a directory cannot have the same path); such a
// put is CONFLICT.
//
// The directory is on this host, and an engine with a local backend deploys
// stop-then-start (a rollout refuses it), so it checks no epoch (docs/architecture.md
// "Epoch"): it does not guard against a paused engine on the same host that resumes
// after another took over.
package fs

import (
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// Store is an objectstorage.Store on a directory.
type Store struct {
	root    string
	objects string // <root>/objects
	tmp     string // <root>/tmp, on the same file system so renames are atomic
}

var _ objectstorage.Store = (*Store)(nil)

// New returns a store under root, creating the directories it needs.
func New(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgument, "object storage root %q: %v", root, err)
	}
	s := &Store{root: abs, objects: filepath.Join(abs, "objects"), tmp: filepath.Join(abs, "tmp")}
	for _, dir := range []string{s.objects, s.tmp} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, protocol.Errorf(protocol.Internal, "object storage: create %s: %v", dir, err)
		}
	}
	return s, nil
}

// LocalStorage says where the data lives: files on this host.
func (s *Store) LocalStorage() string { return "files under " + s.root }

// dir is the directory of prefix; call it with a checked prefix only.
func (s *Store) dir(prefix string) string {
	return filepath.Join(s.objects, filepath.FromSlash(prefix))
}

// path is the file of an object, after checking its name.
func (s *Store) path(ctx context.Context, prefix, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return "", err
	}
	return filepath.Join(s.dir(prefix), key), nil
}

func (s *Store) internal(op, prefix, key string, err error) error {
	return protocol.Errorf(protocol.Internal, "object storage %s %.64q under %.64q in %s: %v", op, key, prefix, s.root, err)
}

// PutObject writes content to a temporary file and renames it into place.
func (s *Store) PutObject(ctx context.Context, prefix, key string, content []byte) error {
	path, err := s.path(ctx, prefix, key)
	if err != nil {
		return err
	}
	tmp, err := s.writeTemp(content)
	if err != nil {
		return s.internal("put", prefix, key, err)
	}
	defer os.Remove(tmp) // a no-op once renamed
	// A concurrent delete may remove the (then empty) directory between MkdirAll and
	// Rename; trying again settles it.
	for attempt := 0; ; attempt++ {
		err = os.MkdirAll(filepath.Dir(path), 0o750)
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err == nil {
			return nil
		}
		switch {
		case errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EEXIST) && !isDir(path):
			return protocol.Errorf(protocol.Conflict, "object storage put %.64q under %.64q: a part of the prefix is an object, not a prefix", key, prefix)
		case isDir(path):
			return protocol.Errorf(protocol.Conflict, "object storage put %.64q under %.64q: that name is a prefix with objects under it", key, prefix)
		case errors.Is(err, iofs.ErrNotExist) && attempt < 3:
			continue
		}
		return s.internal("put", prefix, key, err)
	}
}

func (s *Store) writeTemp(content []byte) (string, error) {
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o640)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// missing reports whether err means "no such object": no file, a directory, or a part
// of the prefix that is a file.
func missing(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// GetObject reads the object's file into the buffer objectstorage.ReadBuffer gives
// for its size. A put replaces the file by a rename, so the file opened keeps the size
// it had.
func (s *Store) GetObject(ctx context.Context, prefix, key string) ([]byte, error) {
	path, err := s.path(ctx, prefix, key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	switch {
	case missing(err):
		return nil, objectstorage.NotFound(prefix, key)
	case err != nil:
		return nil, s.internal("get", prefix, key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, s.internal("get", prefix, key, err)
	case !fi.Mode().IsRegular():
		return nil, objectstorage.NotFound(prefix, key)
	}
	content, err := objectstorage.ReadBuffer(ctx, prefix, key, fi.Size())
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(f, content); err != nil {
		return nil, s.internal("get", prefix, key, err)
	}
	return content, nil
}

// stat returns the object's file info; a directory is not an object.
func (s *Store) stat(ctx context.Context, op, prefix, key string) (string, os.FileInfo, error) {
	path, err := s.path(ctx, prefix, key)
	if err != nil {
		return "", nil, err
	}
	fi, err := os.Stat(path)
	switch {
	case missing(err), err == nil && !fi.Mode().IsRegular():
		return "", nil, objectstorage.NotFound(prefix, key)
	case err != nil:
		return "", nil, s.internal(op, prefix, key, err)
	}
	return path, fi, nil
}

// GetObjectMetadata returns the file's size and modification time.
func (s *Store) GetObjectMetadata(ctx context.Context, prefix, key string) (objectstorage.Metadata, error) {
	_, fi, err := s.stat(ctx, "get_object_metadata", prefix, key)
	if err != nil {
		return objectstorage.Metadata{}, err
	}
	return objectstorage.Metadata{Size: fi.Size(), ModifiedAt: fi.ModTime().UTC()}, nil
}

// DeleteObject removes the object's file and the directories it leaves empty.
func (s *Store) DeleteObject(ctx context.Context, prefix, key string) error {
	path, _, err := s.stat(ctx, "delete", prefix, key)
	if err != nil {
		return err
	}
	if err := os.Remove(path); missing(err) {
		return objectstorage.NotFound(prefix, key)
	} else if err != nil {
		return s.internal("delete", prefix, key, err)
	}
	// Remove empty prefix directories up to the root; a directory that is not empty,
	// or that a concurrent put just created, stays.
	for dir := filepath.Dir(path); dir != s.objects && strings.HasPrefix(dir, s.objects); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// ListObjects returns the sorted names of the files directly under prefix.
func (s *Store) ListObjects(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.dir(prefix))
	switch {
	case missing(err):
		return []string{}, nil
	case err != nil:
		return nil, protocol.Errorf(protocol.Internal, "object storage list %.64q in %s: %v", prefix, s.root, err)
	}
	keys := make([]string, 0, len(entries))
	for _, e := range entries { // ReadDir sorts by name
		if e.Type().IsRegular() {
			keys = append(keys, e.Name())
		}
	}
	return keys, nil
}

// ListObjectsRecursive returns every file under prefix at any depth, sorted, named
// relative to prefix with "/" between segments; directories are not objects.
func (s *Store) ListObjectsRecursive(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	root := s.dir(prefix)
	names := []string{}
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		switch {
		case err != nil && missing(err):
			// The prefix has no directory, or a concurrent delete removed one.
			return nil
		case err != nil:
			return err
		case !d.Type().IsRegular():
			return ctx.Err()
		case p == root:
			return nil // the prefix names an object: nothing lies under it
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.Internal, "object storage list_objects_recursive %.64q in %s: %v", prefix, s.root, err)
	}
	slices.Sort(names) // WalkDir's lexical order sorts "a/b" after "a.txt", not before
	return names, nil
}
