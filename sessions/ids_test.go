package sessions

import (
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/protocol"
)

func TestOwnerIDsAre32LowercaseHexAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewOwnerID()
		if !ValidOwnerID(id) {
			t.Fatalf("NewOwnerID() = %q is not valid", id)
		}
		if seen[id] {
			t.Fatalf("NewOwnerID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestValidOwnerIDRejectsEverythingElse(t *testing.T) {
	for _, id := range []string{
		"", "engine-1", "ENGINE",
		strings.Repeat("a", 31), strings.Repeat("a", 33),
		strings.Repeat("A", 32), strings.Repeat("g", 32),
		strings.Repeat("a", 31) + ":", strings.Repeat("a", 31) + ".",
	} {
		if ValidOwnerID(id) {
			t.Errorf("ValidOwnerID(%q) = true", id)
		}
	}
	if !ValidOwnerID("0123456789abcdef0123456789abcdef") {
		t.Error("a 32 lowercase hex id is rejected")
	}
}

func TestSessionIDsCarryTheirOwner(t *testing.T) {
	owner := NewOwnerID()
	id := NewSessionID(owner)
	if !ValidSessionID(id) {
		t.Fatalf("NewSessionID = %q is not valid", id)
	}
	got, local, err := ParseSessionID(id)
	if err != nil || got != owner || !ValidOwnerID(local) || id != owner+":"+local {
		t.Fatalf("ParseSessionID(%q) = %q, %q, %v", id, got, local, err)
	}
	if NewSessionID(owner) == id {
		t.Fatal("two session ids are equal")
	}
	for _, bad := range []string{"", owner, owner + ":", ":" + owner, "engine-1:" + owner, owner + ":" + strings.ToUpper(owner), owner + ":" + owner + ":x"} {
		if ValidSessionID(bad) {
			t.Errorf("ValidSessionID(%q) = true", bad)
		}
		if _, _, err := ParseSessionID(bad); protocol.CodeOf(err) != protocol.InvalidArgument || !strings.Contains(err.Error(), "session id") {
			t.Errorf("ParseSessionID(%q) error = %v, want INVALID_ARGUMENT naming the id", bad, err)
		}
	}
}

func TestSubjects(t *testing.T) {
	owner := NewOwnerID()
	const p = "abi.svc.object_storage.v1.transfer"
	if got := OpenSubject(p); got != p+".open" {
		t.Errorf("OpenSubject = %q", got)
	}
	if got := OwnersQueue(p); got != p+".owners" {
		t.Errorf("OwnersQueue = %q", got)
	}
	if got := OwnerSubject(p, owner, "read"); got != p+"."+owner+".read" {
		t.Errorf("OwnerSubject = %q", got)
	}
	got, err := protocol.TransferSessionSubject(p, NewSessionID(owner), "close")
	if err != nil || got != p+"."+owner+".close" {
		t.Errorf("TransferSessionSubject = %q, %v", got, err)
	}
	if _, err := protocol.TransferSessionSubject(p, "legacy-id", "close"); err == nil {
		t.Error("a session id without owner gives a subject")
	}
}

func TestNewTransferHostRejectsABadOwner(t *testing.T) {
	srv := natstest.Start(t)
	if _, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix, Owner: "engine-1", LeaseValid: leaseHeld}); err == nil || !strings.Contains(err.Error(), "engine-1") {
		t.Fatalf("err = %v, want one naming the owner", err)
	}
	h, err := NewTransferHost(connect(t, srv), TransferConfig{Prefix: testPrefix, LeaseValid: leaseHeld})
	if err != nil || !ValidOwnerID(h.Owner()) {
		t.Fatalf("a host without owner got %q, %v", h.Owner(), err)
	}
}
