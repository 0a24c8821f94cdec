// Package backendhealth watches a serving engine's backends: every call that fails in
// a backend is counted and logged (rate-limited) and starts a probe, which reruns with
// a growing pause until the backend answers; while it fails, the backend is down and
// the engine is not ready. KeyValue and ObjectStorage wrap a backend so that its
// Health observes every call.
package backendhealth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/group"
	"github.com/abi-engine/engine/primaries/keyvalue"
	"github.com/abi-engine/engine/primaries/objectstorage"
	"github.com/abi-engine/engine/protocol"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Timings of the backend probe: the first one runs at the first failed call, the next
// ones back off while the backend stays down.
const (
	probeTimeout    = 5 * time.Second
	probeFirstPause = 250 * time.Millisecond
	probeMaxPause   = 5 * time.Second
	// failureLogEvery bounds the failure log of one backend: a backend that fails
	// every call of a busy service logs one line per period, with the count.
	failureLogEvery = 10 * time.Second
)

// healthProbeKey is the key (keyvalue) or object name (object_storage) the probe
// reads: any answer, found or not, proves the backend answers.
const healthProbeKey = "abi-engine-health-probe"

// bucketProber is a backend that can check its own storage and recreate it when it
// was deleted (the jetstream backends).
type bucketProber interface {
	Probe(ctx context.Context) (recreated bool, err error)
}

// Health watches one backend. Every call that fails in the backend is counted
// and logged (rate-limited), and starts a probe, which reruns with a growing pause
// until the backend answers: a jetstream backend first recreates its bucket if it is
// gone, then the probe reads. While the probe fails, the backend is down, and a serving
// engine is not ready (docs/design.md §4.5).
type Health struct {
	service, adapter string
	log              *zap.Logger
	probe            func(ctx context.Context) (recreated bool, err error)
	onFailure        func() // the errors metric
	onFenced         func() // the fenced writes metric
	logs             rate.Sometimes
	fencedLogs       rate.Sometimes

	ctx    context.Context
	cancel context.CancelFunc
	probes *group.Group // the probe (one at a time); close shuts it and waits for it

	mu       sync.Mutex
	down     error // the last probe's error while the backend is down
	probing  bool
	failures int // failed calls since the last failure log line
}

// New watches the backend of service (adapter names it): probe checks it, onFailure
// counts a failed call and onFenced a write refused for a stale epoch.
func New(service, adapter string, log *zap.Logger, probe func(context.Context) (bool, error), onFailure, onFenced func()) *Health {
	ctx, cancel := context.WithCancel(context.Background())
	return &Health{
		service: service, adapter: adapter, probe: probe, onFailure: onFailure, onFenced: onFenced,
		log:        log.With(zap.String("service", service), zap.String("backend", adapter)),
		logs:       rate.Sometimes{Interval: failureLogEvery},
		fencedLogs: rate.Sometimes{Interval: failureLogEvery},
		ctx:        ctx, cancel: cancel, probes: group.New(),
	}
}

// backendFailure reports whether err is the backend failing, as opposed to the
// caller's mistake (a bad key, a missing object, a conflict) or the caller giving up.
// A call that ran out of time in the backend counts: a backend that hangs is failing
// as surely as one that answers with an error.
func backendFailure(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch protocol.CodeOf(err) {
	case protocol.Unavailable, protocol.Internal:
		return true
	}
	return false
}

// Observe looks at a call's error and returns it unchanged. A write the backend
// refused for a stale epoch (epoch.ErrFenced: another engine took over) is counted as
// fenced, not as a failure: the backend answers, this engine is the one behind.
func (h *Health) Observe(err error) error {
	if errors.Is(err, epoch.ErrFenced) {
		h.onFenced()
		h.fencedLogs.Do(func() {
			h.log.Warn("write refused by the backend: it holds a newer epoch, so another engine took over (further ones are counted in abi_engine_fenced_writes_total)", zap.Error(err))
		})
		return err
	}
	if !backendFailure(err) {
		return err
	}
	h.onFailure()
	h.mu.Lock()
	h.failures++
	start := !h.probing && h.ctx.Err() == nil
	if start {
		h.probing = true
	}
	h.mu.Unlock()
	h.logs.Do(func() {
		h.mu.Lock()
		n := h.failures
		h.failures = 0
		h.mu.Unlock()
		h.log.Warn("backend call failed", zap.Int("failures_since_last_line", n), zap.Error(err))
	})
	if start && !h.probes.Go(h.probeUntilUp) {
		h.mu.Lock()
		h.probing = false // closed meanwhile: nothing probes any more
		h.mu.Unlock()
	}
	return err
}

// probeUntilUp probes until the backend answers or the engine stops.
func (h *Health) probeUntilUp() {
	pause := probeFirstPause
	for {
		ctx, cancel := context.WithTimeout(h.ctx, probeTimeout)
		recreated, err := h.probe(ctx)
		cancel()
		if h.ctx.Err() != nil {
			return
		}
		if recreated {
			h.log.Warn("the backend's bucket was gone: recreated it, empty, with the configured settings")
		}
		h.mu.Lock()
		wasDown := h.down != nil
		if err == nil {
			h.down, h.probing = nil, false
			h.mu.Unlock()
			if wasDown {
				h.log.Info("backend answers again")
			}
			return
		}
		h.down = err
		h.mu.Unlock()
		if !wasDown {
			h.log.Error("backend down: a serving engine is not ready until it answers", zap.Error(err))
		}
		t := time.NewTimer(pause)
		select {
		case <-h.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, probeMaxPause)
	}
}

// Service is the service whose backend h watches.
func (h *Health) Service() string { return h.service }

// Adapter names the backend h watches.
func (h *Health) Adapter() string { return h.adapter }

// Down is nil while the backend answers, else why it does not.
func (h *Health) Down() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down == nil {
		return nil
	}
	return fmt.Errorf("%s backend (%s) down: %w", h.service, h.adapter, h.down)
}

// Close stops the probe and waits for it.
func (h *Health) Close() error {
	h.cancel()
	h.probes.Shut()
	return h.probes.Wait(context.Background()) // the probe returns once cancelled: its calls are bounded by probeTimeout
}

// KeyValueProbe checks a keyvalue backend: its bucket if it has one, then a read.
func KeyValueProbe(s keyvalue.Store) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		recreated, err := probeBucket(ctx, s)
		if err != nil {
			return false, err
		}
		_, err = s.Exists(ctx, healthProbeKey)
		return recreated, err
	}
}

// probeBucket checks backend's own storage when it has one (bucketProber): whether it
// had to recreate it, or why it could not.
func probeBucket(ctx context.Context, backend any) (bool, error) {
	if p, ok := backend.(bucketProber); ok {
		return p.Probe(ctx)
	}
	return false, nil
}

// ObjectStorageProbe checks an object_storage backend: its bucket if it has one, then
// a read (NOT_FOUND is an answer).
func ObjectStorageProbe(s objectstorage.Store) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		recreated, err := probeBucket(ctx, s)
		if err != nil {
			return false, err
		}
		_, err = s.GetObjectMetadata(ctx, "", healthProbeKey)
		if errors.Is(err, protocol.ErrNotFound) {
			err = nil
		}
		return recreated, err
	}
}

// KeyValue is a keyvalue backend whose failures its backendHealth observes.
type KeyValue struct {
	keyvalue.Store
	H *Health
}

func (s KeyValue) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, found, err := s.Store.Get(ctx, key)
	return v, found, s.H.Observe(err)
}

// GetShared passes the backend's shared read through (keyvalue.SharedReader).
func (s KeyValue) GetShared(ctx context.Context, key string) ([]byte, bool, error) {
	v, found, err := keyvalue.GetShared(ctx, s.Store, key)
	return v, found, s.H.Observe(err)
}

func (s KeyValue) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.H.Observe(s.Store.Set(ctx, key, value, ttl))
}

func (s KeyValue) SetIfNotExists(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	set, err := s.Store.SetIfNotExists(ctx, key, value, ttl)
	return set, s.H.Observe(err)
}

func (s KeyValue) Delete(ctx context.Context, key string) (bool, error) {
	deleted, err := s.Store.Delete(ctx, key)
	return deleted, s.H.Observe(err)
}

func (s KeyValue) DeleteIfValueMatches(ctx context.Context, key string, value []byte) (bool, error) {
	deleted, err := s.Store.DeleteIfValueMatches(ctx, key, value)
	return deleted, s.H.Observe(err)
}

func (s KeyValue) Exists(ctx context.Context, key string) (bool, error) {
	ok, err := s.Store.Exists(ctx, key)
	return ok, s.H.Observe(err)
}

func (s KeyValue) ListKeys(ctx context.Context, prefix, after string, limit int) ([]string, bool, error) {
	keys, more, err := s.Store.ListKeys(ctx, prefix, after, limit)
	return keys, more, s.H.Observe(err)
}

func (s KeyValue) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	ttl, found, err := s.Store.TTL(ctx, key)
	return ttl, found, s.H.Observe(err)
}

// ObjectStorage is an object_storage backend whose failures its backendHealth
// observes.
type ObjectStorage struct {
	objectstorage.Store
	H *Health
}

func (s ObjectStorage) PutObject(ctx context.Context, prefix, key string, content []byte) error {
	return s.H.Observe(s.Store.PutObject(ctx, prefix, key, content))
}

func (s ObjectStorage) GetObject(ctx context.Context, prefix, key string) ([]byte, error) {
	v, err := s.Store.GetObject(ctx, prefix, key)
	return v, s.H.Observe(err)
}

func (s ObjectStorage) DeleteObject(ctx context.Context, prefix, key string) error {
	return s.H.Observe(s.Store.DeleteObject(ctx, prefix, key))
}

func (s ObjectStorage) ListObjects(ctx context.Context, prefix string) ([]string, error) {
	keys, err := s.Store.ListObjects(ctx, prefix)
	return keys, s.H.Observe(err)
}

func (s ObjectStorage) ListObjectsRecursive(ctx context.Context, prefix string) ([]string, error) {
	keys, err := s.Store.ListObjectsRecursive(ctx, prefix)
	return keys, s.H.Observe(err)
}

func (s ObjectStorage) GetObjectMetadata(ctx context.Context, prefix, key string) (objectstorage.Metadata, error) {
	md, err := s.Store.GetObjectMetadata(ctx, prefix, key)
	return md, s.H.Observe(err)
}
