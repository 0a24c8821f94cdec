package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/primaries/internal/jsepoch"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
)

// chunkSize is the size of an object's chunks: nats.go's default, which its reader
// takes from the metadata either way. A broker whose max payload is smaller gets
// smaller chunks (chunkFor), else every object above it would fail to store.
const chunkSize = 128 << 10

// chunkFor is the chunk size on a broker with max payload maxPayload: chunkSize, or
// what fits one message with room for the protocol's framing. A broker below 2 KiB
// still gets 1 KiB chunks, and a put there fails as the broker says.
func chunkFor(maxPayload int64) int {
	return int(max(1024, min(chunkSize, maxPayload-1024)))
}

// purgeTimeout bounds the purge of chunks no object refers to, run even when the
// call's context has ended.
const purgeTimeout = 5 * time.Second

func chunkSubject(bucket, id string) string { return "$O." + bucket + ".C." + id }

func metaSubject(bucket, name string) string {
	return "$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// AdoptEpoch adopts the epoch the engine serves under (package internal/epoch), as the
// keyvalue backend does: advanced when older, used when equal, refused (matching
// epoch.ErrFenced) when the bucket holds a newer one. From then on every put and delete
// carries it. The object-storage transfer host writes through the same Store, so the
// object_storage primary's adoption covers its writes too.
func (s *Store) AdoptEpoch(ctx context.Context, n uint64) error {
	// The bucket may not be the one opened (deleted and recreated from outside, with
	// other settings): one that could lose what is written under n is refused here,
	// before the epoch is adopted in it.
	if _, err := s.opened.Ensure(ctx); err != nil {
		return fmt.Errorf("object storage jetstream: adopt epoch %d: %w", n, err)
	}
	if err := s.fence.Adopt(ctx, n); err != nil {
		return fmt.Errorf("object storage jetstream: %w", err)
	}
	return nil
}

// writeError turns a failed metadata write into a protocol error; jserr says whether
// it may have been stored. Surely not: no object changed (the new chunks are purged),
// UNAVAILABLE, retryable. Perhaps (the ack was lost): UNAVAILABLE, not retryable.
func (s *Store) writeError(op, prefix, key string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case jserr.Classify(err).NotStored():
		return protocol.Refused("object storage %s %.64q under %.64q: JetStream bucket %s refused the write, so no object changed: %v", op, key, prefix, s.bucket, err)
	default:
		return protocol.Errorf(protocol.Unavailable, "object storage %s %.64q under %.64q: JetStream bucket %s: %v; the %s may have taken effect, so do not resend it blindly", op, key, prefix, s.bucket, err, op)
	}
}

// commit writes an object's metadata, the commit point of a put or a delete, with the
// epoch check (jsepoch.Fence.Write).
func (s *Store) commit(ctx context.Context, op, prefix, key string, info *js.ObjectInfo) error {
	data, err := json.Marshal(info)
	if err != nil {
		return protocol.Errorf(protocol.Internal, "object storage %s %.64q under %.64q: encode its metadata: %v", op, key, prefix, err)
	}
	what := func() string { return fmt.Sprintf("object storage %s %.64q under %.64q", op, key, prefix) }
	conflict, err := s.fence.Write(ctx, what, func(tok jsepoch.Token) error {
		m := &nats.Msg{Subject: metaSubject(s.bucket, info.Name), Data: data, Header: nats.Header{}}
		m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
		if !failpoint.On(s.fp, failpoint.SkipEpoch) {
			s.fence.Carry(m, tok) // the one place this backend attaches its token
		}
		_, err := jsdomain.Publish(ctx, s.js, m)
		return err
	}, func(err error) error { return s.writeError(op, prefix, key, err) })
	if conflict { // the epoch check is the metadata's only expectation
		return protocol.Refused("object storage %s %.64q under %.64q: JetStream bucket %s refused the metadata although its epoch record is current, so no object changed", op, key, prefix, s.bucket)
	}
	return err
}

// PutObject stores content, replacing any previous object of that name: the chunks
// under a new nuid, then the metadata that makes them the object (the commit, epoch
// checked), then a purge of the old object's chunks. Readers see the old object or the
// new one, never part of one.
func (s *Store) PutObject(ctx context.Context, prefix, key string, content []byte) error {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return err
	}
	n := name(prefix, key)
	old, err := s.obs.GetInfo(ctx, n, js.GetObjectInfoShowDeleted())
	if err != nil && !errors.Is(err, js.ErrObjectNotFound) {
		return s.readError("put", prefix, key, err) // nothing written yet
	}
	id := nuid.Next()
	chunks := chunkSubject(s.bucket, id)
	count, err := s.sendChunks(ctx, chunks, content)
	if err != nil {
		s.purge(ctx, chunks)
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return protocol.Refused("object storage put %.64q under %.64q: JetStream bucket %s: storing its chunks failed before its metadata, so no object changed: %v", key, prefix, s.bucket, err)
	}
	sum := sha256.Sum256(content)
	info := &js.ObjectInfo{
		ObjectMeta: js.ObjectMeta{Name: n, Opts: &js.ObjectMetaOptions{ChunkSize: uint32(s.chunk)}},
		Bucket:     s.bucket,
		NUID:       id,
		Size:       uint64(len(content)),
		Chunks:     count,
		Digest:     "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:]),
	}
	if err := s.commit(ctx, "put", prefix, key, info); err != nil {
		if pe := (*protocol.Error)(nil); errors.As(err, &pe) && pe.Retryable {
			s.purge(ctx, chunks) // surely not committed: nothing refers to them
		}
		return err
	}
	if old != nil && !old.Deleted {
		s.purge(ctx, chunkSubject(s.bucket, old.NUID))
	}
	return nil
}

// sendChunks publishes content in chunks on subject, all at once, and waits for every
// acknowledgement.
func (s *Store) sendChunks(ctx context.Context, subject string, content []byte) (uint32, error) {
	var acks []js.PubAckFuture
	for off := 0; off < len(content); off += s.chunk {
		end := min(off+s.chunk, len(content))
		f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: content[off:end]})
		if err != nil {
			return 0, err
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return 0, err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return uint32(len(acks)), nil
}

// purge removes chunks no object refers to. A failure leaves them as garbage that no
// read sees.
func (s *Store) purge(ctx context.Context, chunks string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), purgeTimeout)
	defer cancel()
	_ = s.stream.Purge(ctx, js.WithPurgeSubject(chunks))
}

// DeleteObject removes the object: its metadata marked deleted (the commit, epoch
// checked), then its chunks purged.
func (s *Store) DeleteObject(ctx context.Context, prefix, key string) error {
	if err := objectstorage.CheckName(prefix, key); err != nil {
		return err
	}
	info, err := s.obs.GetInfo(ctx, name(prefix, key))
	if err != nil {
		return s.readError("delete", prefix, key, err) // nothing deleted yet; a missing object is NOT_FOUND
	}
	chunks := chunkSubject(s.bucket, info.NUID)
	info.Deleted = true
	info.Size, info.Chunks, info.Digest, info.ModTime = 0, 0, "", time.Time{}
	if err := s.commit(ctx, "delete", prefix, key, info); err != nil {
		return err
	}
	s.purge(ctx, chunks)
	return nil
}
