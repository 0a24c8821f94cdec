package primaries

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/protocol"
)

// Strict decoding (issue 15), through the Operation Handle makes, so the fast path,
// the strict fallback and the timeout check are all on the way: every body either
// decodes to want or is refused INVALID_ARGUMENT with a message naming the member.
func TestStrictDecoding(t *testing.T) {
	type got struct {
		req      protocol.KVSetRequest
		deadline bool
	}
	var last got
	op := Handle(func(ctx context.Context, r *protocol.KVSetRequest) (protocol.Empty, error) {
		_, ok := ctx.Deadline()
		last = got{req: *r, deadline: ok}
		return protocol.Empty{}, nil
	})
	for _, tc := range []struct {
		name, body string
		want       *protocol.KVSetRequest // nil: refused
		deadline   bool
		refusal    []string // in the message, when refused
	}{
		{name: "exact", body: `{"key":"a","value":"aGk=","ttl_seconds":5}`, want: &protocol.KVSetRequest{Key: "a", Value: []byte("hi"), TTLSeconds: 5}},
		{name: "escaped name is the same name", body: `{"k\u0065y":"a"}`, want: &protocol.KVSetRequest{Key: "a"}},
		{name: "unknown members are ignored", body: `{"key":"a","other":[1,{"x":2}]}`, want: &protocol.KVSetRequest{Key: "a"}},
		{name: "fractional ttl", body: `{"key":"a","ttl_seconds":0.25}`, want: &protocol.KVSetRequest{Key: "a", TTLSeconds: 0.25}},
		{name: "timeout", body: `{"context":{"timeout_ms":5000},"key":"a"}`,
			want: &protocol.KVSetRequest{Ctx: protocol.Ctx{Context: &protocol.RequestContext{TimeoutMS: 5000}}, Key: "a"}, deadline: true},
		{name: "upper-case member", body: `{"KEY":"a"}`, refusal: []string{`"KEY"`, "case-sensitive", `"key"`}},
		{name: "capitalised member beside the exact one", body: `{"key":"a","Key":"b"}`, refusal: []string{`"Key"`, "case-sensitive"}},
		{name: "Kelvin sign folds to k", body: `{"\u212aey":"a"}`, refusal: []string{"case-sensitive", `"key"`}},
		{name: "upper-case context member", body: `{"key":"a","context":{"TIMEOUT_MS":5}}`, refusal: []string{`"context.TIMEOUT_MS"`, "case-sensitive"}},
		{name: "bytes as an array", body: `{"key":"a","value":[104,105]}`, refusal: []string{`"value"`, "base64 string", "array"}},
		{name: "bytes not base64", body: `{"key":"a","value":"!!"}`, refusal: []string{"base64"}},
		{name: "ttl too large for a float", body: `{"key":"a","ttl_seconds":1e400}`, refusal: []string{`"ttl_seconds"`, "fits a 64-bit float", "1e400"}},
		{name: "timeout above int64", body: `{"key":"a","context":{"timeout_ms":9223372036854775808}}`, refusal: []string{`"context.timeout_ms"`, "64 bits"}},
		{name: "timeout in exponent form", body: `{"key":"a","context":{"timeout_ms":1e30}}`, refusal: []string{`"context.timeout_ms"`, "1e30"}},
		{name: "fractional timeout", body: `{"key":"a","context":{"timeout_ms":1.5}}`, refusal: []string{`"context.timeout_ms"`}},
		{name: "timeout that overflows a duration", body: `{"key":"a","context":{"timeout_ms":9223372036854775807}}`, refusal: []string{"context.timeout_ms", "too large"}},
		{name: "negative timeout", body: `{"key":"a","context":{"timeout_ms":-1}}`, refusal: []string{"context.timeout_ms", "negative"}},
		{name: "key of the wrong type", body: `{"key":5}`, refusal: []string{`"key"`, "a string", "a number"}},
		{name: "not an object", body: `[1]`, refusal: []string{"JSON object", "an array"}},
		{name: "not JSON", body: `{"key":"a"`, refusal: []string{"not valid JSON"}},
		{name: "not UTF-8", body: "{\"key\":\"\xff\"}", refusal: []string{"UTF-8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last = got{}
			_, err := op(t.Context(), []byte(tc.body))
			if tc.want != nil {
				if err != nil {
					t.Fatalf("%s: %v, want it decoded", tc.body, err)
				}
				if !equalSet(last.req, *tc.want) || last.deadline != tc.deadline {
					t.Fatalf("%s decoded to %+v (deadline %v), want %+v (deadline %v)", tc.body, last.req, last.deadline, *tc.want, tc.deadline)
				}
				return
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.InvalidArgument {
				t.Fatalf("%s: %v (ran with %+v), want INVALID_ARGUMENT", tc.body, err, last.req)
			}
			for _, s := range tc.refusal {
				if !strings.Contains(pe.Message, s) {
					t.Errorf("%s: message %q does not say %q", tc.body, pe.Message, s)
				}
			}
		})
	}
}

func equalSet(a, b protocol.KVSetRequest) bool {
	if (a.Context == nil) != (b.Context == nil) || (a.Context != nil && *a.Context != *b.Context) {
		return false
	}
	return a.Key == b.Key && string(a.Value) == string(b.Value) && (a.Value == nil) == (b.Value == nil) && a.TTLSeconds == b.TTLSeconds
}

// The fast path allocates only the request and its strings: no decoder state.
func TestFastDecodeAllocations(t *testing.T) {
	body := []byte(`{"context":{"timeout_ms":10000},"key":"bench-key"}`)
	var r protocol.KVKeyRequest
	n := testing.AllocsPerRun(100, func() {
		r = protocol.KVKeyRequest{}
		if !r.DecodeFast(body) {
			t.Fatal("the SDK's get request did not take the fast path")
		}
	})
	if n > 2 { // the RequestContext and the key
		t.Errorf("%v allocations, want at most 2", n)
	}
}

// An inline call's timeout_ms is a deadline without a timer: Deadline reports it and
// Err says DEADLINE_EXCEEDED once it has passed, while Done is the run's (nothing
// waits on it in a call that never waits). A pooled call's is context.WithTimeout.
func TestInlineTimeoutHasNoTimer(t *testing.T) {
	type seen struct {
		deadline bool
		left     time.Duration
		err      error
		done     <-chan struct{}
	}
	var got seen
	op := Handle(func(ctx context.Context, _ *protocol.KVKeyRequest) (protocol.Empty, error) {
		d, ok := ctx.Deadline()
		got = seen{deadline: ok, left: time.Until(d), done: ctx.Done()}
		for ctx.Err() == nil { // the 1 ms passes; no timer needed to see it
			runtime.Gosched()
		}
		got.err = ctx.Err()
		return protocol.Empty{}, nil
	})
	run := newRun()
	defer run.cancel(nil)
	if _, err := op(inlineCtx{Context: run.ctx}, []byte(`{"context":{"timeout_ms":1},"key":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if !got.deadline || got.left > time.Millisecond || got.err != context.DeadlineExceeded || got.done != run.ctx.Done() {
		t.Fatalf("inline: deadline %v (%s left), err %v, done is the run's: %v", got.deadline, got.left, got.err, got.done == run.ctx.Done())
	}
	if _, err := op(run.ctx, []byte(`{"context":{"timeout_ms":1},"key":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if got.done == run.ctx.Done() || got.err != context.DeadlineExceeded {
		t.Fatalf("pooled: err %v, done is the run's: %v; want a context of its own", got.err, got.done == run.ctx.Done())
	}
}
