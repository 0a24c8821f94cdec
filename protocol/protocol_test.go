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
	cases := []struct {
		err  *Error
		want string
	}{
		{Refused("fenced"), `{"error":{"code":"UNAVAILABLE","message":"fenced","retryable":true}}`},
		{Errorf(Unavailable, "ack lost"), `{"error":{"code":"UNAVAILABLE","message":"ack lost","retryable":false}}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(Envelope{Error: c.err})
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("json = %s, want %s", b, c.want)
		}
	}
}

// Only Refused is retryable: Errorf cannot know whether the call ran, so none of its
// errors says it did not.
func TestOnlyRefusedIsRetryable(t *testing.T) {
	for _, c := range Codes {
		if e := Errorf(c, "x"); e.Retryable {
			t.Errorf("Errorf(%s) is retryable", c)
		}
	}
	if e := Refused("lease not confirmed %d", 1); !e.Retryable || e.Code != Unavailable || e.Message != "lease not confirmed 1" {
		t.Errorf("Refused = %+v, want UNAVAILABLE, retryable, with the message", e)
	}
	if e := Exhausted("full %d", 1); !e.Retryable || e.Code != ResourceExhausted || e.Message != "full 1" {
		t.Errorf("Exhausted = %+v, want RESOURCE_EXHAUSTED, retryable, with the message", e)
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

// The kernel subjects ServiceSubject gives as constants are the ones it builds.
func TestKernelSubjects(t *testing.T) {
	for svc, ops := range map[string][]string{
		KeyValue:      {OpGet, OpSet, OpSetIfNotExists, OpDelete, OpDeleteIfValueMatches, OpExists},
		ObjectStorage: {OpPutObject, OpGetObject, OpDeleteObject, OpListObjects, OpGetObjectMetadata},
	} {
		for _, op := range ops {
			want := ServicePrefix + svc + ".v1." + op
			if got := kernelSubject(svc, op); got != want {
				t.Errorf("kernelSubject(%q, %q) = %q, want %q", svc, op, got, want)
			}
			if got := ServiceSubject(svc, op); got != want {
				t.Errorf("ServiceSubject(%q, %q) = %q, want %q", svc, op, got, want)
			}
		}
	}
	if got := ServiceSubject("other", OpGet); got != "abi.svc.other.v1.get" {
		t.Errorf("ServiceSubject of another service = %q", got)
	}
	if n := testing.AllocsPerRun(10, func() { _ = ServiceSubject(KeyValue, OpGet) }); n != 0 {
		t.Errorf("ServiceSubject of a kernel operation allocates %v times", n)
	}
}
