package sdkemu_test

import (
	"bytes"
	"regexp"
	"testing"

	transferv1 "github.com/abi-engine/engine/proto/abi/transfer/v1"
	"github.com/abi-engine/engine/test/sdkemu"
)

// sessionID is what the SDK accepts as a session id: an owner of 32 lowercase hex.
var sessionID = regexp.MustCompile(`^[0-9a-f]{32}:.+$`)

// pattern is n bytes that are not all alike, so a misplaced piece shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// dataReplies are the replies of a read loop that carried data (not pending, not done).
func dataReplies(replies []*transferv1.ReadResponse) []*transferv1.ReadResponse {
	var out []*transferv1.ReadResponse
	for _, r := range replies {
		if !r.GetPending() && !r.GetDone() {
			out = append(out, r)
		}
	}
	return out
}

// objectTransfers is case e: an object of three chunks put through open, writes,
// start, reads until done and close, and got back through start and reads, the last
// data reply not done and done in a reply of its own; an empty object; a missing
// object is OBJECT_NOT_FOUND at the start or the first read; another caller's session
// is PERMISSION_DENIED; the engine holds no session afterwards.
func (f *fixture) objectTransfers(t *testing.T) {
	ctx := ctxFor(t)
	x, err := f.sdk.Open(ctx, sdkemu.ObjectsPrefix, "put", sdkemu.ObjectMetadata("e", "big.bin"), maxPayload/2)
	if err != nil {
		t.Fatalf("open put: %v", err)
	}
	if !sessionID.MatchString(x.ID) || x.Chunk < 1024 || x.Chunk > maxPayload/2 {
		t.Fatalf("open put: id %q chunk %d, want <32 hex>:… and 1024 ≤ chunk ≤ %d", x.ID, x.Chunk, maxPayload/2)
	}
	data := pattern(3 * int(x.Chunk))
	for seq := 0; seq < 3; seq++ {
		if err := x.Write(ctx, uint64(seq), data[seq*int(x.Chunk):(seq+1)*int(x.Chunk)]); err != nil {
			t.Fatalf("write %d: %v", seq, err)
		}
	}
	if err := x.Start(ctx); err != nil {
		t.Fatalf("start put: %v", err)
	}
	got, replies, err := x.ReadAll(ctx, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("reads of a put: %d bytes, %v", len(got), err)
	}
	if last := replies[len(replies)-1]; !last.GetDone() || last.GetSequence() != 0 {
		t.Errorf("a put's read: %v, want done at sequence 0", last)
	}
	if err := x.Close(ctx); err != nil {
		t.Errorf("close put: %v", err)
	}

	y, err := f.sdk.Open(ctx, sdkemu.ObjectsPrefix, "get", sdkemu.ObjectMetadata("e", "big.bin"), maxPayload/2)
	if err != nil {
		t.Fatalf("open get: %v", err)
	}
	if err := y.Start(ctx); err != nil {
		t.Fatalf("start get: %v", err)
	}
	got, replies, err = y.ReadAll(ctx, 0)
	if err != nil {
		t.Fatalf("reads of a get: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("get: %d bytes back, want the %d put", len(got), len(data))
	}
	pieces := dataReplies(replies)
	if len(pieces) < 3 {
		t.Errorf("get of 3 chunks came in %d data replies", len(pieces))
	}
	for _, r := range pieces {
		if len(r.GetData()) > int(y.Chunk) {
			t.Errorf("a piece of %d bytes, above the granted chunk %d", len(r.GetData()), y.Chunk)
		}
	}
	if last := replies[len(replies)-1]; !last.GetDone() || len(last.GetData()) != 0 || last.GetSequence() != uint64(len(pieces)) {
		t.Errorf("the get's end: %v, want done, no data, sequence %d (the one asked after the last piece)", last, len(pieces))
	}
	if err := y.Close(ctx); err != nil {
		t.Errorf("close get: %v", err)
	}
	if again, _, err := f.sdk.GetObjectStream(ctx, "e", "big.bin"); err != nil || !bytes.Equal(again, data) {
		t.Errorf("get_object as the SDK's facade reads it: %d bytes, %v", len(again), err)
	}

	if _, err := f.sdk.PutObjectStream(ctx, "e", "empty.bin", nil); err != nil {
		t.Fatalf("put of an empty object (no writes): %v", err)
	}
	empty, replies, err := f.sdk.GetObjectStream(ctx, "e", "empty.bin")
	if err != nil || len(empty) != 0 || len(replies) != 1 || !replies[0].GetDone() {
		t.Errorf("get of an empty object: %d bytes, replies %v, %v; want the first read done", len(empty), replies, err)
	}

	z, err := f.sdk.Open(ctx, sdkemu.ObjectsPrefix, "get", sdkemu.ObjectMetadata("e", "missing.bin"), maxPayload/2)
	if err != nil {
		t.Fatalf("open get of a missing object: %v", err)
	}
	err = z.Start(ctx)
	if err == nil {
		_, _, err = z.ReadAll(ctx, 0)
	}
	wantCode(t, "get of a missing object (start or first read)", err, "OBJECT_NOT_FOUND")
	_ = z.Close(ctx)

	w, err := f.sdk.Open(ctx, sdkemu.ObjectsPrefix, "get", sdkemu.ObjectMetadata("e", "big.bin"), maxPayload/2)
	if err != nil {
		t.Fatalf("open get: %v", err)
	}
	theirs := f.other.Session(sdkemu.ObjectsPrefix, w.ID)
	wantCode(t, "another caller's start", theirs.Start(ctx), "PERMISSION_DENIED")
	if err := w.Start(ctx); err != nil {
		t.Fatalf("the owner's start after another caller's: %v", err)
	}
	_, err = theirs.Read(ctx, 0)
	wantCode(t, "another caller's read", err, "PERMISSION_DENIED")
	wantCode(t, "another caller's close", theirs.Close(ctx), "PERMISSION_DENIED")
	if got, _, err := w.ReadAll(ctx, 0); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the owner's reads after another caller's: %d bytes, %v", len(got), err)
	}
	if err := w.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	f.noSessions(t)
}
