package bbolt

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/abi-engine/engine/protocol"
)

// Which bbolt failures are retryable: every one before a commit, as nothing reached
// the file; not a failed commit, which may have written the meta page before its
// fsync failed (the next transaction then reads the write). The closed file is real;
// a commit that fails on the disk is built by hand.
func TestWhichErrorsAreRetryable(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "kv.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _, getErr := s.Get(ctx, "k")
	cases := []struct {
		name      string
		err       error
		retryable bool
	}{
		{"a write to a closed file", s.Set(ctx, "k", []byte("v"), 0), true},
		{"a read of a closed file", getErr, true},
		{"a commit that failed on the disk", s.wrap(syscall.EIO, true), false},
		{"a write that failed before its commit", s.wrap(syscall.EIO, false), true},
	}
	for _, c := range cases {
		var pe *protocol.Error
		if !errors.As(c.err, &pe) || pe.Code != protocol.Unavailable || pe.Retryable != c.retryable {
			t.Errorf("%s: got %v, want UNAVAILABLE retryable=%v", c.name, c.err, c.retryable)
		}
	}
	if err := s.wrap(context.Canceled, true); err != context.Canceled {
		t.Errorf("a cancelled call: got %v, want it passed on to the primary", err)
	}
}
