package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestBrokerLocksItsStoreDirectory: a second broker on a store directory a running one
// holds is refused before its nats-server starts, naming the lock file and the holder
// (with its URL, a random port included), and writes nothing there; once the first has
// stopped, the directory is free.
func TestBrokerLocksItsStoreDirectory(t *testing.T) {
	dir := t.TempDir()
	first, err := NewBroker("127.0.0.1:0", dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Lock("first-instance"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- first.Serve(ctx) }()
	url, err := first.URL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := listTree(t, dir)

	second, err := NewBroker("127.0.0.1:0", dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	err = second.Lock("second-instance")
	var locked *StoreLockedError
	if !errors.As(err, &locked) || !errors.Is(err, ErrStoreLocked) {
		t.Fatalf("Lock = %v, want a *StoreLockedError", err)
	}
	if locked.Holder == nil || locked.Holder.URL != url || locked.Holder.Instance != "first-instance" || locked.Holder.PID != os.Getpid() {
		t.Fatalf("holder = %+v, want the first broker (%s)", locked.Holder, url)
	}
	for _, s := range []string{filepath.Join(dir, LockFile), "first-instance", url} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %q", err, s)
		}
	}
	// Served without Lock, it takes the lock itself and is refused the same way.
	sctx, scancel := context.WithCancel(context.Background())
	serr := second.Serve(sctx)
	scancel()
	if !errors.Is(serr, ErrStoreLocked) {
		t.Fatalf("Serve = %v, want ErrStoreLocked", serr)
	}
	if _, err := second.URL(context.Background()); !errors.Is(err, ErrStoreLocked) {
		t.Fatalf("URL = %v, want ErrStoreLocked", err)
	}
	if after := listTree(t, dir); after != before {
		t.Errorf("the refused broker touched the store:\nbefore %s\nafter  %s", before, after)
	}

	cancel()
	<-errc
	if err := second.Lock("second-instance"); err != nil {
		t.Fatalf("Lock after the first stopped = %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
}

// listTree is every file under dir with its size and modification time.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b.WriteString(rel + " " + info.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
