// Package jsbucket opens the JetStream buckets the engine owns (the lease's, and the
// buckets of the jetstream-backed services) one way for all of them: bind the bucket,
// or create it with its configured settings when it does not exist; refuse an existing
// one whose settings the engine cannot rely on, naming each; and, while the engine
// runs, recreate it with the same settings when it was deleted under the engine (by an
// operator, a script, a broker that lost its store). Settings the engine gives a
// bucket's stream itself (StreamSetting, such as atomic batch publish) are set on a
// bucket it creates, on an existing one when it opens it, and on one it recreates.
//
// A bucket is a stream: KV_<name> for a KV bucket, OBJ_<name> for an object store.
// Handles bound to it (jetstream.KeyValue, jetstream.ObjectStore) address it by stream
// name and subjects, so they keep working on a recreated bucket: callers keep theirs.
package jsbucket

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Spec is a bucket the engine owns.
type Spec struct {
	// What names the bucket's role in messages: "lease bucket", "keyvalue bucket".
	What string
	// KeyValue or Object (exactly one) is the configuration the bucket is created with.
	KeyValue *jetstream.KeyValueConfig
	Object   *jetstream.ObjectStoreConfig
	// Require lists the settings an existing bucket must have: Open and Ensure refuse
	// one that breaks any of them (*ShapeError). A bucket this package creates has them
	// by construction when they agree with the configuration above.
	Require []Setting
	// Stream lists settings the engine gives the bucket's stream itself, after Open
	// and after every recreation: one stream update sets those it lacks. Optional.
	Stream []StreamSetting
	// Prepare runs on the bucket's stream after Open and after every recreation, once
	// the Stream settings are set (the services' buckets turn direct gets off there).
	// Optional.
	Prepare func(ctx context.Context, js jetstream.JetStream, stream string) error
	// FirstSeq, optional and for a KeyValue bucket only, gives the first sequence of a
	// bucket this package creates (firstseq.go): a recreated bucket's revisions then
	// start where no earlier incarnation's were.
	FirstSeq func() uint64
}

// StreamSetting is a setting the engine gives a bucket's stream itself, where
// jetstream.KeyValueConfig and ObjectStoreConfig have no field for it.
type StreamSetting struct {
	// Name is the setting as the stream configuration names it: "allow_atomic".
	Name string
	// Set gives cfg the setting and reports whether that changed cfg.
	Set func(cfg *jetstream.StreamConfig) (changed bool)
	// Needs says what to do when the broker does not keep the setting (an older
	// server drops a field it does not know): "nats-server 2.12 or newer".
	Needs string
}

// AtomicPublish allows atomic batch publish on the stream (nats-server 2.12 and
// newer): a batch of messages whose expectations are all checked, and which is stored
// whole or not at all.
func AtomicPublish() StreamSetting {
	return StreamSetting{
		Name: "allow_atomic",
		Set: func(cfg *jetstream.StreamConfig) bool {
			changed := !cfg.AllowAtomicPublish
			cfg.AllowAtomicPublish = true
			return changed
		},
		Needs: "atomic batch publish needs nats-server 2.12 or newer",
	}
}

// Setting is one setting a bucket's stream must have.
type Setting struct {
	// Name is the setting as an operator knows it: "history", "storage".
	Name string
	// Want is the value it must have, as Of prints it.
	Want string
	// Of prints the value a stream has.
	Of func(jetstream.StreamConfig) string
}

// History requires the bucket to keep n revisions per key.
func History(n int) Setting {
	return Setting{Name: "history", Want: strconv.Itoa(n), Of: func(c jetstream.StreamConfig) string {
		return strconv.FormatInt(c.MaxMsgsPerSubject, 10)
	}}
}

// FileStorage requires the bucket to be kept on disk, so a server restart keeps it.
func FileStorage() Setting {
	return Setting{Name: "storage", Want: "file", Of: func(c jetstream.StreamConfig) string {
		return strings.ToLower(c.Storage.String())
	}}
}

// NoMaxAge requires the bucket not to expire entries by age (a KV bucket's TTL is its
// stream's max age).
func NoMaxAge() Setting {
	return Setting{Name: "ttl (max age)", Want: "none", Of: func(c jetstream.StreamConfig) string {
		if c.MaxAge == 0 {
			return "none"
		}
		return c.MaxAge.String()
	}}
}

// NoPerKeyTTL refuses a bucket made for per-key TTLs (nats.go's LimitMarkerTTL, which
// turns on the subject delete markers that expiring keys leave). A bucket that merely
// allows a message TTL is accepted: nats-py, the Python engines' client, creates every
// KV bucket so (its create_key_value sets allow_msg_ttl), a Python engine makes
// ABI_ENGINE on first use, and a key expires by it only if a writer puts a TTL on the
// key, which neither engine does (an update also drops a TTL the key had).
func NoPerKeyTTL() Setting {
	return Setting{Name: "per-key ttl", Want: "off", Of: func(c jetstream.StreamConfig) string {
		if c.SubjectDeleteMarkerTTL > 0 {
			return "on"
		}
		return "off"
	}}
}

// Replicas requires n replicas.
func Replicas(n int) Setting {
	return Setting{Name: "replicas", Want: strconv.Itoa(n), Of: func(c jetstream.StreamConfig) string {
		return strconv.Itoa(max(c.Replicas, 1))
	}}
}

// Mismatch is a setting an existing bucket has wrong.
type Mismatch struct {
	Setting, Want, Got string
}

// ShapeError refuses a bucket whose settings break the Spec's requirements; it names
// every wrong setting.
type ShapeError struct {
	What, Bucket, Stream string
	Wrong                []Mismatch
}

func (e *ShapeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (stream %s) has settings the engine cannot rely on: ", e.What, e.Bucket, e.Stream)
	for i, m := range e.Wrong {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s is %s (want %s)", m.Setting, m.Got, m.Want)
	}
	fmt.Fprintf(&b, "; give the bucket these settings, or delete it and the engine creates it")
	return b.String()
}

// ErrNotConnected is Ensure's answer while the connection is not connected.
var ErrNotConnected = errors.New("not connected to the broker")

// ErrSettling is Ensure's answer for a bucket gone for less than Settle: a later
// Ensure recreates it.
var ErrSettling = errors.New("recreating it once its deletion has settled")

// Settle is how long a bucket must have been seen missing before Ensure recreates
// it. The broker answers "stream not found" before it has finished deleting the
// stream's files (nats-server 2.15.3 takes it out of the account first), and a stream
// created in that window gets its directory moved away by the deletion: it answers
// reads and hangs every write.
const Settle = time.Second

// Bucket is an opened bucket.
type Bucket struct {
	js     jetstream.JetStream
	spec   Spec
	name   string
	stream string

	mu        sync.Mutex
	missing   time.Time // when Ensure first found the bucket gone, zero while it exists
	unprepped bool      // Prepare failed on the recreated bucket: run it again
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.name }

// Stream is the name of the bucket's stream.
func (b *Bucket) Stream() string { return b.stream }

// Open binds the bucket, creating it when it does not exist, checks its settings and
// runs Prepare. Two engines creating it at once is harmless: both ask for the same
// configuration, and each checks what it got.
func Open(ctx context.Context, js jetstream.JetStream, spec Spec) (*Bucket, error) {
	b, err := newBucket(js, spec)
	if err != nil {
		return nil, err
	}
	cfg, err := b.config(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		cfg, err = b.create(ctx)
	}
	if err != nil {
		return nil, b.errorf("open", err)
	}
	if err := b.check(cfg); err != nil {
		return nil, err
	}
	if err := b.prepare(ctx); err != nil {
		return nil, b.errorf("open", err)
	}
	return b, nil
}

// newBucket names spec's bucket and its stream.
func newBucket(js jetstream.JetStream, spec Spec) (*Bucket, error) {
	b := &Bucket{js: js, spec: spec}
	switch {
	case spec.KeyValue != nil && spec.Object == nil:
		b.name, b.stream = spec.KeyValue.Bucket, "KV_"+spec.KeyValue.Bucket
	case spec.Object != nil && spec.KeyValue == nil:
		b.name, b.stream = spec.Object.Bucket, "OBJ_"+spec.Object.Bucket
	default:
		return nil, errors.New("jsbucket: a spec needs exactly one of KeyValue and Object")
	}
	return b, nil
}

// Ensure makes sure the bucket exists with the settings it needs, recreating it (with
// the configured settings, empty) when it is gone; recreated says so. Callers run it
// after a call on the bucket failed. A bucket is recreated only once it has been found
// gone for Settle (before that Ensure answers ErrSettling), so a caller checks again.
// While the connection is not connected it asks nothing: the broker is away, which is
// not a deleted bucket, and the check would only wait.
func (b *Bucket) Ensure(ctx context.Context) (recreated bool, err error) {
	if nc := b.js.Conn(); nc != nil && nc.Status() != nats.CONNECTED {
		return false, fmt.Errorf("%s %s: %w (%s)", b.spec.What, b.name, ErrNotConnected, nc.Status())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cfg, err := b.config(ctx)
	if err == nil {
		b.missing = time.Time{}
		if err := b.check(cfg); err != nil {
			return false, err
		}
		if b.unprepped {
			if err := b.prepare(ctx); err != nil {
				return false, b.errorf("prepare", err)
			}
			b.unprepped = false
		} else if err := b.setStream(ctx, cfg); err != nil {
			// Someone took a setting away from the running bucket: give it back.
			return false, b.errorf("check", err)
		}
		return false, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, b.errorf("check", err)
	}
	now := time.Now()
	if b.missing.IsZero() {
		b.missing = now
	}
	if wait := Settle - now.Sub(b.missing); wait > 0 {
		return false, fmt.Errorf("%s %s is gone: %w (in %s)", b.spec.What, b.name, ErrSettling, wait.Round(time.Millisecond))
	}
	b.missing = time.Time{}
	if cfg, err = b.create(ctx); err != nil {
		return false, b.errorf("recreate", err)
	}
	if err := b.check(cfg); err != nil {
		return false, err
	}
	if err := b.prepare(ctx); err != nil {
		b.unprepped = true
		return true, b.errorf("recreate", err)
	}
	return true, nil
}

func (b *Bucket) errorf(what string, err error) error {
	return fmt.Errorf("%s %s: %s: %w", b.spec.What, b.name, what, err)
}

// config reads the bucket's stream configuration.
//
// It asks again when an answer does not come within an attempt: on a cluster, a request
// that reaches the stream while it has no leader (its node lost, the election under
// way) is never answered, and waiting for it would cost the caller's whole deadline
// (nats.go's 5 s without one), while Ensure holds the bucket: a holder's Serve, which
// checks the bucket before it adopts the epoch, then waited 5 s behind a backend
// probe's lost request with the stream long led again. Each attempt doubles the last,
// so a broker that is only slow is still answered.
func (b *Bucket) config(ctx context.Context) (jetstream.StreamConfig, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, infoTimeout)
		defer cancel()
	}
	for attempt := firstInfoAttempt; ; attempt *= 2 {
		actx, cancel := context.WithTimeout(ctx, attempt)
		st, err := b.js.Stream(actx, b.stream)
		cancel()
		switch {
		case err == nil:
			return st.CachedInfo().Config, nil
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
			return jetstream.StreamConfig{}, err
		}
	}
}

const (
	// firstInfoAttempt is how long config waits for the first answer before it asks
	// again: far above a stream info's usual milliseconds, far below a lease.
	firstInfoAttempt = 250 * time.Millisecond
	// infoTimeout bounds config for a caller without a deadline, as nats.go would.
	infoTimeout = 5 * time.Second
)

// create creates the bucket and returns the configuration its stream then has: the
// one asked for, or another engine's when it created the bucket first.
func (b *Bucket) create(ctx context.Context) (jetstream.StreamConfig, error) {
	var err error
	switch {
	case b.spec.KeyValue != nil && b.spec.FirstSeq != nil:
		err = b.createFrom(ctx, b.spec.FirstSeq())
	case b.spec.KeyValue != nil:
		_, err = b.js.CreateKeyValue(ctx, *b.spec.KeyValue)
	default:
		_, err = b.js.CreateObjectStore(ctx, *b.spec.Object)
	}
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		return jetstream.StreamConfig{}, err
	}
	return b.config(ctx)
}

func (b *Bucket) check(cfg jetstream.StreamConfig) error {
	var wrong []Mismatch
	for _, s := range b.spec.Require {
		if got := s.Of(cfg); got != s.Want {
			wrong = append(wrong, Mismatch{Setting: s.Name, Want: s.Want, Got: got})
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	return &ShapeError{What: b.spec.What, Bucket: b.name, Stream: b.stream, Wrong: wrong}
}

// prepare sets the Stream settings the stream lacks, then runs Prepare.
func (b *Bucket) prepare(ctx context.Context) error {
	if len(b.spec.Stream) > 0 {
		cfg, err := b.config(ctx)
		if err != nil {
			return err
		}
		if err := b.setStream(ctx, cfg); err != nil {
			return err
		}
	}
	if b.spec.Prepare == nil {
		return nil
	}
	return b.spec.Prepare(ctx, b.js, b.stream)
}

// setStream updates the stream, whose configuration is cfg, once with every Stream
// setting it lacks, and checks that the broker kept them.
func (b *Bucket) setStream(ctx context.Context, cfg jetstream.StreamConfig) error {
	changed := false
	for _, s := range b.spec.Stream {
		if s.Set(&cfg) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	st, err := b.js.UpdateStream(ctx, cfg)
	if err != nil {
		return fmt.Errorf("set %s on stream %s: %w", b.settingNames(), b.stream, err)
	}
	got := st.CachedInfo().Config
	for _, s := range b.spec.Stream {
		if s.Set(&got) {
			return fmt.Errorf("stream %s: the broker did not keep %s: %s", b.stream, s.Name, s.Needs)
		}
	}
	return nil
}

func (b *Bucket) settingNames() string {
	names := make([]string, len(b.spec.Stream))
	for i, s := range b.spec.Stream {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Inspect checks an existing bucket against spec's requirements without creating or
// changing anything (abi-engine doctor reads an account it must leave as it found
// it): found is false when the bucket does not exist; a *ShapeError names every
// setting it has wrong. cfg is the stream configuration it has, for checks of their
// own.
func Inspect(ctx context.Context, js jetstream.JetStream, spec Spec) (cfg jetstream.StreamConfig, found bool, err error) {
	b, err := newBucket(js, spec)
	if err != nil {
		return cfg, false, err
	}
	cfg, err = b.config(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return cfg, false, nil
	}
	if err != nil {
		return cfg, false, b.errorf("inspect", err)
	}
	return cfg, true, b.check(cfg)
}

// DataSettings are what a service's bucket (the jetstream backends' data) must have so
// that nothing the engine acknowledged vanishes by itself: the configured storage (an
// existing bucket on memory storage loses everything at a server restart), no max age
// (a TTL), and, when history is above 0, that many revisions per key (a KV bucket
// keeping more than the engine needs is not one it made: it was recreated from
// outside). Open refuses a bucket that breaks them, and so does every Ensure, which
// the backends run whenever the bucket may have changed under them.
func DataSettings(storage jetstream.StorageType, history int) []Setting {
	want := FileStorage()
	if storage == jetstream.MemoryStorage {
		want.Want = "memory"
	}
	s := []Setting{want, NoMaxAge()}
	if history > 0 {
		s = append(s, History(history))
	}
	return s
}
