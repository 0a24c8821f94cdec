package jetstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/natstest"
)

// chunkSubjects lists the chunk subjects of the bucket that hold messages, apart from
// the epoch record's.
func chunkSubjects(t *testing.T, ctx context.Context, s *Store) []string {
	t.Helper()
	info, err := s.stream.Info(ctx, js.WithSubjectFilter(chunkSubject(s.bucket, ">")))
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for subj := range info.State.Subjects {
		if !strings.HasPrefix(subj, chunkSubject(s.bucket, epochBase)) {
			subjects = append(subjects, subj)
		}
	}
	slices.Sort(subjects)
	return subjects
}

// The backend writes objects itself; nats.go's object store reads them as its own
// (its Get checks the size and the SHA-256 digest), lists them and sees them deleted.
func TestObjectsReadByNatsGo(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, srv.URL(), "OBJ_COMPAT")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	j, err := js.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := j.ObjectStore(ctx, "OBJ_COMPAT")
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string][]byte{
		"empty":       {},
		"small":       []byte("hello"),
		"one-chunk":   bytes.Repeat([]byte("x"), chunkSize),
		"multi-chunk": bytes.Repeat([]byte("0123456789"), 50_000),
	}
	for key, content := range objects {
		if err := s.PutObject(ctx, "dir", key, content); err != nil {
			t.Fatal(err)
		}
		r, err := obs.Get(ctx, "dir/"+key)
		if err != nil {
			t.Fatalf("nats.go Get(%s): %v", key, err)
		}
		got, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("nats.go read %s: %d bytes, %v; want %d bytes", key, len(got), err, len(content))
		}
		info, err := obs.GetInfo(ctx, "dir/"+key)
		if err != nil || info.Size != uint64(len(content)) || info.ModTime.IsZero() {
			t.Fatalf("nats.go GetInfo(%s) = %+v, %v", key, info, err)
		}
	}
	list, err := obs.List(ctx)
	if err != nil || len(list) != len(objects) {
		t.Fatalf("nats.go List = %d objects, %v; want %d", len(list), err, len(objects))
	}
	if err := s.DeleteObject(ctx, "dir", "small"); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.GetInfo(ctx, "dir/small"); !errors.Is(err, js.ErrObjectNotFound) {
		t.Fatalf("nats.go GetInfo of a deleted object = %v, want not found", err)
	}
	// An object nats.go wrote, this backend overwrites (and purges the old chunks).
	if _, err := obs.PutBytes(ctx, "dir/theirs", bytes.Repeat([]byte("t"), 3*chunkSize)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "dir", "theirs", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if got, err := obs.GetBytes(ctx, "dir/theirs"); err != nil || string(got) != "mine" {
		t.Fatalf("nats.go GetBytes after the overwrite = %q, %v", got, err)
	}
	// One chunk subject per live non-empty object (one-chunk, multi-chunk, theirs):
	// every replaced or deleted one was purged.
	if got := chunkSubjects(t, ctx, s); len(got) != 3 {
		t.Fatalf("chunk subjects %v, want those of the 3 live non-empty objects", got)
	}
}

// The chunks of a put refused for its epoch are purged: the bucket holds what it held.
func TestRefusedPutLeavesNoChunks(t *testing.T) {
	srv := natstest.Start(t)
	old, cur := open(t, srv.URL(), "OBJ_REFUSED"), open(t, srv.URL(), "OBJ_REFUSED")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := old.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := old.PutObject(ctx, "p", "k", bytes.Repeat([]byte("a"), 2*chunkSize)); err != nil {
		t.Fatal(err)
	}
	before := chunkSubjects(t, ctx, old)
	if err := cur.AdoptEpoch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := old.PutObject(ctx, "p", "k", bytes.Repeat([]byte("b"), 3*chunkSize)); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("PutObject under a stale epoch = %v, want fenced", err)
	}
	if err := old.PutObject(ctx, "p", "new", bytes.Repeat([]byte("b"), 3*chunkSize)); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("PutObject under a stale epoch = %v, want fenced", err)
	}
	if after := chunkSubjects(t, ctx, old); !slices.Equal(after, before) {
		t.Fatalf("chunk subjects after the refused puts %v, before %v", after, before)
	}
}

// As for keyvalue: a recreated bucket lost its record; the probe of the serving engine
// adopts its epoch again, and the older engine stays fenced.
func TestRecreatedBucket(t *testing.T) {
	srv := natstest.Start(t)
	old, cur := open(t, srv.URL(), "OBJ_RECREATED"), open(t, srv.URL(), "OBJ_RECREATED")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := old.AdoptEpoch(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := cur.AdoptEpoch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := cur.js.DeleteObjectStore(ctx, "OBJ_RECREATED"); err != nil {
		t.Fatal(err)
	}
	if err := cur.PutObject(ctx, "p", "k", []byte("v")); err == nil {
		t.Fatal("PutObject into a deleted bucket succeeded")
	}
	probeUntilRecreated(t, ctx, cur)
	if err := cur.PutObject(ctx, "p", "k", []byte("v")); err != nil {
		t.Fatalf("PutObject after the probe re-adopted: %v", err)
	}
	if err := old.PutObject(ctx, "p", "k", []byte("old")); !errors.Is(err, epoch.ErrFenced) {
		t.Fatalf("PutObject by the older engine after the recreation = %v, want fenced", err)
	}
}
