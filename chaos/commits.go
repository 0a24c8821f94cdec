package chaos

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/abi-engine/engine/bench"
	"github.com/abi-engine/engine/chaos/check"
	kvjs "github.com/abi-engine/engine/primaries/keyvalue/jetstream"
)

// commitLog records what storage committed to the keys a scenario watches, read from
// storage itself, not from the calls: check.NoStaleWrite judges it. The harness opens
// the log of its keyvalue backend (h.commitLog) before the writes it is to see.
type commitLog interface {
	// watch starts recording key's commits.
	watch(ctx context.Context, key string) error
	// commits is everything recorded so far, each key's commits in storage's order.
	commits(ctx context.Context) ([]check.Commit, error)
	close()
}

// commitLog opens the log of the run's keyvalue backend, once.
func (h *harness) commitLog(ctx context.Context) (commitLog, error) {
	if h.commits != nil {
		return h.commits, nil
	}
	var (
		l   commitLog
		err error
	)
	if h.opts.KeyValue == KeyValuePostgres {
		l, err = h.postgresCommits(ctx)
	} else {
		l, err = h.jetstreamCommits(ctx)
	}
	if err != nil {
		return nil, err
	}
	h.commits = l
	return l, nil
}

// kvWatch records the commits of keys of the JetStream keyvalue bucket by watching
// their subjects: a watch delivers every revision of a key in the stream's order.
type kvWatch struct {
	kv jetstream.KeyValue

	mu       sync.Mutex
	got      []check.Commit
	watchers []jetstream.KeyWatcher
	wg       sync.WaitGroup
}

func (h *harness) jetstreamCommits(ctx context.Context) (*kvWatch, error) {
	js, err := jetstream.New(h.nc)
	if err != nil {
		return nil, fmt.Errorf("chaos: watch the keyvalue bucket: %w", err)
	}
	kv, err := js.KeyValue(ctx, kvjs.DefaultBucket)
	if err != nil {
		return nil, fmt.Errorf("chaos: watch the keyvalue bucket %s: %w", kvjs.DefaultBucket, err)
	}
	return &kvWatch{kv: kv}, nil
}

func (w *kvWatch) watch(ctx context.Context, key string) error {
	// The backend stores a key under its unpadded base64url encoding
	// (primaries/keyvalue/jetstream).
	kw, err := w.kv.Watch(ctx, base64.RawURLEncoding.EncodeToString([]byte(key)))
	if err != nil {
		return fmt.Errorf("chaos: watch key %q: %w", key, err)
	}
	w.mu.Lock()
	w.watchers = append(w.watchers, kw)
	w.mu.Unlock()
	w.wg.Go(func() {
		for e := range kw.Updates() {
			if e == nil {
				continue // the end of what was stored before the watch began
			}
			c := check.Commit{At: time.Now(), Revision: e.Revision(), Key: key}
			if e.Operation() == jetstream.KeyValuePut {
				c.Hash = bench.ValueHash(e.Value())
			} else {
				c.Deleted = true
			}
			w.mu.Lock()
			w.got = append(w.got, c)
			w.mu.Unlock()
		}
	})
	return nil
}

func (w *kvWatch) commits(context.Context) ([]check.Commit, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]check.Commit(nil), w.got...), nil
}

func (w *kvWatch) close() {
	w.mu.Lock()
	ws := w.watchers
	w.watchers = nil
	w.mu.Unlock()
	for _, kw := range ws {
		_ = kw.Stop() // closes its updates: the goroutine ends
	}
	w.wg.Wait()
}
