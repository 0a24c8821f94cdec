package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestErrorIsMatchesByCode(t *testing.T) {
	err := fmt.Errorf("get: %w", Errorf(NotFound, "key %q", "a"))
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("errors.Is(%v, ErrNotFound) = false", err)
	}
	if errors.Is(err, ErrConflict) {
		t.Fatalf("errors.Is(%v, ErrConflict) = true", err)
	}
	if CodeOf(err) != NotFound || CodeOf(errors.New("x")) != Internal {
		t.Fatal("CodeOf")
	}
}

func TestEnvelopeJSON(t *testing.T) {
	b, err := json.Marshal(Envelope{Error: Errorf(Unavailable, "fenced")})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"error":{"code":"UNAVAILABLE","message":"fenced","retryable":true}}`
	if string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
}

func TestCodes(t *testing.T) {
	for _, c := range Codes {
		if !c.Valid() || c.HTTPStatus() < 400 {
			t.Errorf("code %s: valid %v status %d", c, c.Valid(), c.HTTPStatus())
		}
	}
	if Code("NOPE").Valid() {
		t.Error("NOPE is valid")
	}
	if got := ServiceSubject("keyvalue", "get"); got != "abi.svc.keyvalue.v1.get" {
		t.Errorf("ServiceSubject = %s", got)
	}
}
