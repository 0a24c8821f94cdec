package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
	"github.com/abi-engine/engine/supervisor"
)

// TestTwoEnginesInOneDirectoryShareNoStore is issue 26 finding 1: a second engine
// started beside the first in the same working directory, with no URL, finds the
// first's broker (at nats.embedded.listen, or through the lock of the store directory
// when the broker listens on a random port) and is refused naming the first, exit 3,
// without touching the store; every write the first acknowledged is read back after
// the first restarts.
func TestTwoEnginesInOneDirectoryShareNoStore(t *testing.T) {
	cases := []struct {
		name   string
		listen func(t *testing.T) string
		says   string // how the second found the first's broker
	}{
		{"no configuration", func(t *testing.T) string {
			if l, err := net.Listen("tcp", "127.0.0.1:4222"); err != nil {
				t.Skipf("the embedded broker's default port 4222 is in use here: %v", err)
			} else {
				l.Close()
			}
			return ""
		}, "nats.embedded.listen 127.0.0.1:4222"},
		{"a fixed listen address", func(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", testproc.FreePort(t)) }, "nats.embedded.listen"},
		{"a random port", func(*testing.T) string { return "127.0.0.1:0" }, filepath.Join("data", "nats", "abi-engine.lock")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, "data", "nats")
			// With a listen address, only it and a short lease: store_dir, the URL and
			// every other key keep their defaults. Without one, no file at all: the quick
			// start, on 4222.
			if listen := tc.listen(t); listen != "" {
				writeConfig(t, dir, fmt.Sprintf("nats:\n  embedded: {listen: %q}\n  engine: {lease_seconds: 2, drain_seconds: 1}\n", listen))
			}
			firstPort := testproc.FreePort(t)
			first := startArgs(t, "first", dir, firstPort, nil, "run", "--http", fmt.Sprintf("127.0.0.1:%d", firstPort))
			first.waitState("serving", 30*time.Second)
			id := first.instanceID()
			url := brokerOf(t, first)

			w := startWrites(t, url, 4)
			w.waitAcked(t, 200, 30*time.Second)
			before := storeFiles(t, store)

			secondPort := testproc.FreePort(t)
			second := startArgs(t, "second", dir, secondPort, nil, "run", "--http", fmt.Sprintf("127.0.0.1:%d", secondPort))
			code := second.exitCode(60 * time.Second)
			out := second.out.String()
			if code != 3 || !strings.Contains(out, id) || !strings.Contains(out, tc.says) {
				t.Fatalf("the second engine: exit %d, want 3 naming the first (%s) and %s\n%s", code, id, tc.says, out)
			}
			t.Logf("the second engine: exit %d: %s", code, lastLine(out))
			if after := storeFiles(t, store); !sameFiles(before, after) {
				t.Errorf("the second engine touched the store: %s", diffFiles(before, after))
			}
			first.waitState("serving", time.Second)

			acked := w.halt(t)
			first.signal(syscall.SIGTERM)
			if code := first.exitCode(30 * time.Second); code != 0 {
				t.Fatalf("the first engine exited %d after SIGTERM", code)
			}
			again := startArgs(t, "first again", dir, firstPort, nil, "run", "--http", fmt.Sprintf("127.0.0.1:%d", firstPort))
			again.waitState("serving", 30*time.Second)
			if lost := readBack(t, brokerOf(t, again), acked); len(lost) > 0 {
				t.Fatalf("%d of %d acknowledged writes are gone, e.g. %v", len(lost), len(acked), lost[:min(5, len(lost))])
			}
			t.Logf("%d acknowledged writes read back", len(acked))
			again.signal(syscall.SIGTERM)
			if code := again.exitCode(30 * time.Second); code != 0 {
				t.Fatalf("the restarted engine exited %d after SIGTERM", code)
			}
		})
	}
}

// TestALockedStoreWithNoBrokerToReachRefusesTheStart: a store directory locked by a
// process whose lock file names no broker (it has not started one yet, or what it
// names does not answer) refuses an engine with no URL, exit 3, naming the lock file and
// the holder, before anything is written into the store.
func TestALockedStoreWithNoBrokerToReachRefusesTheStart(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "data", "nats")
	lock, err := supervisor.LockStore(store, "the-test-holder")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	writeConfig(t, dir, "nats:\n  embedded: {listen: \"127.0.0.1:0\"}\n  connect_timeout_seconds: 1\n")
	before := storeFiles(t, store)
	code, out := runCommand(t, dir, nil, "run", "--http", "")
	if code != 3 || !strings.Contains(out, filepath.Join("data", "nats", supervisor.LockFile)) ||
		!strings.Contains(out, "the-test-holder") || !strings.Contains(out, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("exit %d, want 3 naming the lock file and its holder\n%s", code, out)
	}
	if after := storeFiles(t, store); !sameFiles(before, after) {
		t.Errorf("the refused engine touched the store: %s", diffFiles(before, after))
	}
	t.Logf("exit %d: %s", code, lastLine(out))
}

// TestAKilledEnginesLockIsLetGo: the lock dies with its process, however it ends: an
// engine killed with SIGKILL leaves a lock file naming it, and the next engine in the
// directory takes the lock, starts the broker on the same store and serves, with every
// write the killed one acknowledged.
func TestAKilledEnginesLockIsLetGo(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "nats:\n  embedded: {listen: \"127.0.0.1:0\"}\n  engine: {lease_seconds: 2, drain_seconds: 1}\n")
	port := testproc.FreePort(t)
	first := startArgs(t, "first", dir, port, nil, "run", "--http", fmt.Sprintf("127.0.0.1:%d", port))
	first.waitState("serving", 30*time.Second)
	w := startWrites(t, brokerOf(t, first), 2)
	w.waitAcked(t, 100, 30*time.Second)
	acked := w.halt(t)
	first.signal(syscall.SIGKILL)
	first.exitCode(10 * time.Second)

	next := startArgs(t, "next", dir, port, nil, "run", "--http", fmt.Sprintf("127.0.0.1:%d", port))
	next.waitState("serving", 30*time.Second)
	if lost := readBack(t, brokerOf(t, next), acked); len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes are gone, e.g. %v", len(lost), len(acked), lost[:min(5, len(lost))])
	}
	next.signal(syscall.SIGTERM)
	if code := next.exitCode(30 * time.Second); code != 0 {
		t.Fatalf("the next engine exited %d after SIGTERM", code)
	}
}

// brokerOf is the URL of the embedded broker of p, as its log says.
func brokerOf(t *testing.T, p *proc) string {
	t.Helper()
	p.waitLog("embedded nats-server ready", 10*time.Second)
	for line := range strings.SplitSeq(p.out.String(), "\n") {
		if !strings.Contains(line, "embedded nats-server ready") {
			continue
		}
		var entry struct{ URL string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.URL == "" {
			t.Fatalf("%s: no URL in %q: %v", p.name, line, err)
		}
		return entry.URL
	}
	t.Fatalf("%s: no embedded broker in its log", p.name)
	return ""
}

// storeFiles is every file under the store with its size and modification time, but
// the first engine's own writes: its message blocks (*.blk), which grow, and roll to a
// new one, as it serves. What a second nats-server on the store writes (index.db,
// thw.db, meta files) and the lock file are all there.
func storeFiles(t *testing.T, store string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(store, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(store, path)
		if strings.HasSuffix(path, ".blk") {
			return nil
		}
		if d.IsDir() {
			files[rel] = ""
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files[rel] = fmt.Sprintf("%d %s", info.Size(), info.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// diffFiles says which files differ between a and b.
func diffFiles(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			d = append(d, fmt.Sprintf("%s: %q -> %q", k, v, w))
		}
	}
	for k, w := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("%s: new (%q)", k, w))
		}
	}
	return strings.Join(d, "; ")
}

func sameFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// writes sets keys through the SDK and records those the engine acknowledged.
type writes struct {
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	acked []string
	more  chan struct{} // a signal per acknowledged write, dropped when nobody waits
}

func startWrites(t *testing.T, url string, workers int) *writes {
	t.Helper()
	tr, err := client.NewTransport(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &writes{stop: cancel, more: make(chan struct{}, 1)}
	for n := range workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("w%d-%d", n, i)
				if _, err := call(ctx, tr, protocol.OpSet, protocol.KVSetRequest{Key: key, Value: []byte(key)}, nil); err != nil {
					continue
				}
				w.mu.Lock()
				w.acked = append(w.acked, key)
				w.mu.Unlock()
				select {
				case w.more <- struct{}{}:
				default:
				}
			}
		}()
	}
	t.Cleanup(func() { w.halt(t) })
	return w
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *writes) waitAcked(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for w.count() < n {
		select {
		case <-w.more:
		case <-deadline:
			t.Fatalf("%d writes acknowledged within %s, want %d", w.count(), within, n)
		}
	}
}

// halt stops the writers and returns the keys whose writes were acknowledged.
func (w *writes) halt(*testing.T) []string {
	w.stop()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.acked...)
}

// readBack gets every key in keys and returns those not found with their value.
func readBack(t *testing.T, url string, keys []string) []string {
	t.Helper()
	tr, err := client.NewTransport(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, key := range keys {
		var got protocol.KVGetReply
		if _, err := call(context.Background(), tr, protocol.OpGet, protocol.KVKeyRequest{Key: key}, &got); err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		if !got.Found || string(got.Value) != key {
			lost = append(lost, key)
		}
	}
	return lost
}

// lastLine is the last line of out that is not empty.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
