package sdkemu_test

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testwait"
	kvv1 "github.com/abi-engine/engine/proto/abi/keyvalue/v1"
	"github.com/abi-engine/engine/test/sdkemu"
)

// TestUploadIsFetchedFromTheEngineThatHandedOver is case g's owner-scoped fetch across
// real processes: a request uploaded to engine A, which then hands over to B, is
// named in a call B serves; B reads it from A, which still holds its sessions while
// it drains, over A's owner-scoped subjects with the caller's token; the value is
// stored, and A, its last session closed by the fetch, exits.
func TestUploadIsFetchedFromTheEngineThatHandedOver(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and starts two abi-engine processes")
	}
	secret := []byte("sdkemu-handover-secret-0123456789abcdef")
	srv := natstest.Start(t)
	bin := sdkemu.BuildEngine(t)
	a := sdkemu.StartEngine(t, bin, srv.URL(), secret, sdkemu.EngineConfig{Rollout: "v1", DrainSeconds: 60, Backend: "jetstream"})
	a.WaitState("serving", 20*time.Second)
	b := sdkemu.StartEngine(t, bin, srv.URL(), secret, sdkemu.EngineConfig{Rollout: "v2", DrainSeconds: 60, Backend: "jetstream"})
	b.WaitState("standby", 20*time.Second)
	idA, idB := a.InstanceID(), b.InstanceID()

	tok, err := sdkemu.Mint(secret, "sdk-ci", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tr := sdkemu.New(natstest.Connect(t, srv.URL()), sdkemu.Static(tok), 10*time.Second)
	value := pattern(10 << 10)
	ctx := ctxFor(t)
	id, err := tr.Upload(ctx, &kvv1.SetRequest{Key: "handover/k", Value: value})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if !strings.HasPrefix(id, idA+":") {
		t.Fatalf("upload %s is not engine A's (%s)", id, idA)
	}

	a.Signal(syscall.SIGTERM)
	b.WaitState("serving", 30*time.Second)
	// A goes on answering until it sees B answer at the broker (a call in that window
	// is served, and may take the upload locally); only then is every call B's.
	testwait.For(t, 30*time.Second, "A to stop accepting", func() bool {
		return strings.Contains(a.Output(), "stopping accepting")
	})
	select {
	case <-a.Exited():
		t.Fatalf("A exited with an upload open, before its drain ended: %v", a.ExitErr())
	default:
	}
	rep, err := tr.CallUploaded(ctx, kv("set"), id, &kvv1.SetResponse{})
	if err != nil {
		t.Fatalf("a set naming A's upload, served by B: %v", err)
	}
	if got := rep.Header.Get("Abi-Engine-Instance"); got != idB {
		t.Errorf("the set was answered by %q, want B %s", got, idB)
	}
	var got kvv1.GetResponse
	call(t, tr, kv("get"), &kvv1.GetRequest{Key: "handover/k"}, &got)
	if !bytes.Equal(got.GetValue(), value) {
		t.Errorf("get: %d bytes, want the %d uploaded", len(got.GetValue()), len(value))
	}
	// The fetch closed the upload, A's last session: A ends its drain and exits 0
	// long before the 60 s bound.
	testwait.Closed(t, a.Exited(), 30*time.Second, "A to exit once the fetch closed its upload")
	if err := a.ExitErr(); err != nil {
		t.Errorf("A exited: %v", err)
	}
}
