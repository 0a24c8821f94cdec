// Package jetstream is the object_storage backend on a JetStream object store, shared
// by every engine on the account. An object may be larger than one NATS message (the
// wire carries such objects by transfers): it is stored in chunks.
//
// An object's name in the bucket is "<prefix>/<key>" ("<key>" at the top level); as a
// key holds no "/", the split is unambiguous.
//
// Reads go through nats.go's ObjectStore. Puts and deletes are written by this backend
// itself, in the object store's layout (chunks on $O.<bucket>.C.<nuid>, the metadata
// as nats.go's ObjectInfo JSON on $O.<bucket>.M.<name in base64url>, rolled up, with
// the SHA-256 digest), so nats.go and the nats CLI read them as their own: the
// metadata message is the commit, and it carries the epoch check (package jsepoch;
// the bucket keeps its epoch on $O.<bucket>.C.abi.epoch, which a chunk's nuid cannot
// be). A put whose metadata is refused (a stale epoch, or any refusal) changed no
// object, and its chunks are purged; it is answered UNAVAILABLE, retryable.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/primaries/internal/jsepoch"
	"github.com/abi-engine/engine/primaries/internal/jsread"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// DefaultBucket is the bucket a Config without one uses.
const DefaultBucket = "ABI_OBJECTS"

// maxReadAttempts bounds the reads of an object that keeps being overwritten while it
// is read (see read).
const maxReadAttempts = 5

// Config names the bucket and how it is kept.
type Config struct {
	// Bucket is the object store bucket; empty means DefaultBucket.
	Bucket string
	// Replicas is the bucket's replication factor; 0 means 1.
	Replicas int
	// Storage is where the server keeps the bucket; the zero value is file storage.
	Storage js.StorageType
	// Failpoints hosts skip-epoch (package failpoint); nil: none.
	Failpoints *failpoint.Set
	// Logger sees the repairs of the bucket's epoch record (deleted or rewritten from
	// outside); nil: none.
	Logger *zap.Logger
}

// epochBase is where the bucket keeps its epoch record, under the chunk subjects
// (listing reads only the metadata subjects).
const epochBase = "abi.epoch"

// Store is an objectstorage.Store on a JetStream object store.
type Store struct {
	js     js.JetStream
	obs    js.ObjectStore
	stream js.Stream
	bucket string
	opened *jsbucket.Bucket
	fence  *jsepoch.Fence
	fp     *failpoint.Set
	large  chan struct{} // a token per read of a large object under way (maxLargeReads)
	chunk  int           // the size of the chunks a put writes (chunkFor)
}

// Reads of objects above largeRead bytes, at most maxLargeReads at once per store,
// whoever asks (a get_object call, a transfer get). Each read is a push consumer whose
// flow control lets up to 32 MiB be on its way to the engine's connection, which the
// broker cuts as a slow consumer past its max_pending (64 MiB by default), taking every
// service's calls with it (issue 26: 48 concurrent gets of a 40 MiB object, 4
// disconnects in 25 s). What a read holds in the end, its object, is the budget's
// business (objectstorage.ReadBuffer, a transfer's Reserve); what is on its way is not,
// and this bounds it. A small object's window never grows past a few MiB, so small
// reads do not wait behind large ones.
const (
	largeRead     = 1 << 20
	maxLargeReads = 2
)

var _ objectstorage.Store = (*Store)(nil)

// New creates the bucket if it does not exist and returns a store on it. An existing
// bucket keeps its configuration, except that reads are answered by the stream leader.
func New(ctx context.Context, j js.JetStream, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	b, err := jsbucket.Open(ctx, j, jsbucket.Spec{
		What: "object_storage bucket",
		Object: &js.ObjectStoreConfig{
			Bucket:      cfg.Bucket,
			Description: "abi-engine object_storage service",
			Replicas:    cfg.Replicas,
			Storage:     cfg.Storage,
		},
		// A bucket that can lose objects by itself (recreated from outside with memory
		// storage or a TTL) is refused, here and whenever it is checked again (Probe,
		// AdoptEpoch).
		Require: jsbucket.DataSettings(cfg.Storage, 0),
		// Adopting an epoch is an atomic batch.
		Stream: []jsbucket.StreamSetting{jsbucket.AtomicPublish()},
		// Reads from the stream leader only: see package jsread.
		Prepare: jsread.LeaderOnly,
	})
	if shape := (*jsbucket.ShapeError)(nil); errors.As(err, &shape) {
		// Not the broker's trouble: the bucket is refused (errors.As finds why).
		return nil, fmt.Errorf("object storage: %w", err)
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.Unavailable, "object storage: %v", err)
	}
	obs, err := j.ObjectStore(ctx, cfg.Bucket)
	if err != nil {
		return nil, protocol.Errorf(protocol.Unavailable, "object storage: JetStream bucket %s: %v", cfg.Bucket, err)
	}
	record, err := jsepoch.New(ctx, j, b.Stream(), chunkSubject(cfg.Bucket, epochBase))
	if err != nil {
		return nil, protocol.Errorf(protocol.Unavailable, "object storage: JetStream bucket %s: %v", cfg.Bucket, err)
	}
	record.OnRepair(jsepoch.LogRepair(cfg.Logger, "object_storage", cfg.Bucket))
	return &Store{js: j, obs: obs, stream: record.Stream(), bucket: cfg.Bucket, opened: b,
		fence: jsepoch.NewFence(record, "JetStream bucket "+cfg.Bucket), fp: cfg.Failpoints,
		large: make(chan struct{}, maxLargeReads), chunk: chunkFor(j.Conn().MaxPayload())}, nil
}

// Probe checks that the bucket exists and recreates it, empty and with the configured
// settings, when it was deleted (recreated says so); then, when the bucket lost its
// epoch record, it adopts the epoch it holds again (epoch.Held.Restore). The engine
// probes after a call failed; the store's handle works on the recreated bucket.
func (s *Store) Probe(ctx context.Context) (recreated bool, err error) {
	if recreated, err = s.opened.Ensure(ctx); err != nil {
		return recreated, err
	}
	if _, err := s.fence.Restore(ctx); err != nil {
		return recreated, fmt.Errorf("object storage jetstream: %w", err)
	}
	return recreated, nil
}

// LocalStorage is empty: the bucket is on the NATS servers, which every engine reaches.
// (An engine that hosts the embedded broker keeps it on this host; the configuration
// says so, not the store.)
func (s *Store) LocalStorage() string { return "" }

func name(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "/" + key
}

// readError turns a failed read into a protocol error. A read stores nothing, so a
// store failure is UNAVAILABLE, retryable. Context errors go to the primary, which
// knows whether its run was stopped.
func (s *Store) readError(op, prefix, key string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, js.ErrObjectNotFound):
		return objectstorage.NotFound(prefix, key)
	default:
		return protocol.Refused("object storage %s %.64q under %.64q: JetStream bucket %s: %v; the read changed nothing", op, key, prefix, s.bucket, err)
	}
}

// GetObject returns the object's content.
func (s *Store) GetObject(ctx context.Context, prefix, key string) ([]byte, error) {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return nil, err
	}
	var err error
	for range maxReadAttempts {
		var content []byte
		var overwritten bool
		content, overwritten, err = s.read(ctx, prefix, key)
		var pe *protocol.Error
		switch {
		case err == nil:
			return content, nil
		case errors.As(err, &pe):
			return nil, pe // the reservation refused it: it read nothing
		case !overwritten:
			return nil, s.readError("get", prefix, key, err)
		}
	}
	return nil, s.readError("get", prefix, key, err)
}

// read reads an object once. The object store replaces an object by writing new
// chunks, then its metadata, then purging the old chunks, so a read that fetched the old
// metadata can wait for chunks that are gone, and nats.go cannot interrupt that wait
// before its context's deadline. So each read gets a deadline of its own, generous for
// the object's size; when it fails and the object has changed meanwhile, overwritten
// says so and the caller reads again. It reads into the buffer objectstorage.ReadBuffer
// gives once the size is known, before anything is read.
func (s *Store) read(ctx context.Context, prefix, key string) (content []byte, overwritten bool, err error) {
	name := name(prefix, key)
	info, err := s.obs.GetInfo(ctx, name)
	if err != nil {
		return nil, false, err
	}
	if info.Size == 0 {
		return []byte{}, false, nil
	}
	buf, err := objectstorage.ReadBuffer(ctx, prefix, key, int64(info.Size))
	if err != nil {
		return nil, false, err
	}
	if info.Size > largeRead {
		select {
		case s.large <- struct{}{}:
			defer func() { <-s.large }()
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	actx, cancel := context.WithTimeout(ctx, readTimeout(info.Size))
	content, err = readExact(actx, s.obs, name, buf)
	cancel()
	if err == nil || ctx.Err() != nil {
		return content, false, err
	}
	cur, ierr := s.obs.GetInfo(ctx, name)
	if ierr != nil {
		return nil, false, ierr // a delete meanwhile is NOT_FOUND
	}
	return nil, cur.NUID != info.NUID, err
}

// readExact reads object name into content, a buffer of the size its metadata gave.
// nats.go's GetBytes reads into a bytes.Buffer that doubles as it grows, so a read
// could hold about twice the object while the budget counts it once. The digest is
// checked at the end, as GetBytes does. An object of another size by now was
// overwritten meanwhile: an error, and the caller reads again.
func readExact(ctx context.Context, obs js.ObjectStore, name string, content []byte) ([]byte, error) {
	res, err := obs.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	info, err := res.Info()
	if err != nil {
		return nil, err
	}
	if info.Size != uint64(len(content)) {
		return nil, fmt.Errorf("object %s is %d bytes now, %d when its read began", name, info.Size, len(content))
	}
	if _, err := io.ReadFull(res, content); err != nil {
		return nil, err
	}
	var more [1]byte
	for range 100 { // a reader may return nothing and no error; io.ReadAll gives up after as many
		switch n, err := res.Read(more[:]); {
		case n > 0:
			return nil, fmt.Errorf("object %s holds more than the %d bytes of its metadata", name, info.Size)
		case err == io.EOF:
			return content, nil
		case err != nil:
			return nil, err
		}
	}
	return nil, io.ErrNoProgress
}

// readTimeout is how long one read of an object of size bytes may take: a second, plus
// a second per MiB (far slower than any broker this runs against).
func readTimeout(size uint64) time.Duration {
	return time.Second + time.Duration(size>>20)*time.Second
}

// GetObjectMetadata returns the object's size and modification time.
func (s *Store) GetObjectMetadata(ctx context.Context, prefix, key string) (objectstorage.Metadata, error) {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return objectstorage.Metadata{}, err
	}
	info, err := s.obs.GetInfo(ctx, name(prefix, key))
	if err != nil {
		return objectstorage.Metadata{}, s.readError("get_object_metadata", prefix, key, err)
	}
	return objectstorage.Metadata{Size: int64(info.Size), ModifiedAt: info.ModTime.UTC()}, nil
}

// ListObjects returns the sorted keys directly under prefix. The object store lists
// every object of the bucket, so this costs one pass over all of them.
func (s *Store) ListObjects(ctx context.Context, prefix string) ([]string, error) {
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	return s.list(ctx, "list", prefix, func(name string) (string, bool) {
		dir, key := path.Split(name)
		return key, strings.TrimSuffix(dir, "/") == prefix
	})
}

// ListObjectsRecursive returns every object under prefix at any depth, sorted, named
// relative to prefix: one pass over all the bucket's objects, as ListObjects.
func (s *Store) ListObjectsRecursive(ctx context.Context, prefix string) ([]string, error) {
	if err := objectstorage.CheckPrefix(prefix); err != nil {
		return nil, err
	}
	return s.list(ctx, "list_objects_recursive", prefix, func(name string) (string, bool) {
		return objectstorage.Relative(prefix, name)
	})
}

// list lists the bucket's objects and keeps, sorted, what pick names.
func (s *Store) list(ctx context.Context, op, prefix string, pick func(name string) (string, bool)) ([]string, error) {
	infos, err := s.obs.List(ctx)
	if errors.Is(err, js.ErrNoObjectsFound) {
		return []string{}, nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	if err != nil {
		return nil, protocol.Refused("object storage %s %.64q: JetStream bucket %s: %v; the read changed nothing", op, prefix, s.bucket, err)
	}
	keys := []string{}
	for _, info := range infos {
		if k, ok := pick(info.Name); ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}
