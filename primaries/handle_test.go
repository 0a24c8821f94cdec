package primaries

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/abi-engine/engine/protocol"
)

// A request type without protocol.Ctx (an embedder's plain struct) is served as one
// with it: Handle does not panic, the body is decoded strictly, and the "context"
// member read beside it bounds the call; a type with a "context" member of its own
// keeps it.
func TestHandleWithoutCtx(t *testing.T) {
	type plain struct {
		ID string `json:"id"`
	}
	type rep struct {
		ID string `json:"id"`
	}
	op := Handle(func(ctx context.Context, r *plain) (rep, error) {
		if _, bounded := ctx.Deadline(); bounded {
			return rep{ID: r.ID + " bounded"}, nil
		}
		return rep{ID: r.ID}, nil
	})
	for body, want := range map[string]string{
		`{"id":"a"}`: `{"id":"a"}`,
		`{"id":"b","context":{"trace_id":"t","timeout_ms":5000}}`: `{"id":"b bounded"}`,
	} {
		out, err := op(context.Background(), []byte(body))
		if err != nil || string(out) != want {
			t.Errorf("%s: %s %v, want %s", body, out, err, want)
		}
	}
	for body, says := range map[string]string{
		`{"id":5}`:                                   `member "id" must be a string`,
		`{"id":"c","context":{"timeout_ms":-1}}`:     "timeout_ms must not be negative",
		`{"id":"c","context":{"timeout_ms":"soon"}}`: `member "context.timeout_ms" must be`,
	} {
		_, err := op(context.Background(), []byte(body))
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.InvalidArgument || !strings.Contains(pe.Message, says) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q", body, err, says)
		}
	}

	type own struct {
		Context string `json:"context"`
	}
	mine := Handle(func(ctx context.Context, r *own) (rep, error) { return rep{ID: r.Context}, nil })
	if out, err := mine(context.Background(), []byte(`{"context":"mine"}`)); err != nil || string(out) != `{"id":"mine"}` {
		t.Errorf("a request with a context member of its own: %s %v", out, err)
	}
}
