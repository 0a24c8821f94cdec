package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/redact"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

func (c *cli) statusCommand() *cobra.Command {
	var conn connFlags
	var asJSON, watch bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show which engine holds the lease of this NATS account",
		Long: `status reads the engine lease (bucket ABI_ENGINE, key owner) and prints its holder,
its revision and how long since it last changed, and the epoch beside it (key epoch):
the fencing token the shared backends check, who holds it and whether it is serving,
draining or drained. It never creates the bucket.

With --watch it prints one line per change of the holder (taken, released, handed
off, evicted) or of the epoch, with the revision, epoch, age and holder, until stopped;
with --json too, each line is a JSON object. On an account where no engine has run yet
it says so on standard error and waits for one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := c.brokerFor(cmd, &conn)
			if err != nil {
				return err
			}
			nc, err := connect(b, "abi-engine status")
			if err != nil {
				return err
			}
			defer nc.Close()
			// A user who may not read the lease is refused by the broker on the side:
			// without this, the read would wait out its timeout.
			watched, _, stop := whenDenied(cmd.Context(), nc)
			defer stop()
			if watch {
				err := watchLease(watched, nc, b.Domain, c.stdout, c.stderr, redact.String(b.URL), asJSON)
				if d := denied(watched); d != nil {
					return runtimeError(readDenied(d))
				}
				if err != nil {
					return runtimeError(fmt.Errorf("watch the engine lease on %s: %w", redact.String(b.URL), err))
				}
				return nil
			}
			ctx, cancel := context.WithTimeout(watched, b.Timeout)
			defer cancel()
			st, err := readLease(ctx, nc, b.Domain)
			if d := denied(ctx); d != nil {
				return runtimeError(readDenied(d))
			}
			if err != nil {
				return runtimeError(fmt.Errorf("read the engine lease on %s: %w", redact.String(b.URL), err))
			}
			st.NATSURL = redact.String(b.URL)
			if asJSON {
				return writeJSON(c.stdout, st.JSON(time.Now()))
			}
			st.print(c.stdout, time.Now())
			return nil
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON (with --watch: one JSON object per line)")
	cmd.Flags().BoolVar(&watch, "watch", false, "print one line per change of the holder or the epoch, until stopped")
	return cmd
}

// leaseStatus is the lease as status reports it.
type leaseStatus struct {
	NATSURL string
	// BucketExists is false when no engine has ever held the lease on this account.
	BucketExists bool
	// Written is false when the bucket exists but the key was never written.
	Written bool
	Record  lease.Record
	// Revision is the revision of the key's last change, a release included.
	Revision uint64
	Changed  time.Time
	// Epoch is the epoch record (none: no engine has settled one); EpochErr says why it
	// could not be read (a value that is not an epoch record).
	Epoch    lease.EpochRecord
	EpochErr error
}

// readLease reads the key without creating the bucket: status must leave an account
// that never ran an engine as it found it.
func readLease(ctx context.Context, nc *nats.Conn, domain string) (leaseStatus, error) {
	js, err := jsdomain.New(nc, domain)
	if err != nil {
		return leaseStatus{}, err
	}
	kv, err := js.KeyValue(ctx, jetstreamstore.DefaultBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return leaseStatus{}, nil
	}
	if err != nil {
		return leaseStatus{}, err
	}
	// History includes a delete marker, so a released lease still says when it was
	// released; the bucket keeps one entry per key.
	st := leaseStatus{BucketExists: true}
	st.Epoch, err = readEpoch(ctx, kv)
	switch {
	case errors.Is(err, lease.ErrEpochValue):
		st.EpochErr = err // shown, not fatal
	case err != nil:
		return leaseStatus{}, err
	}
	entries, err := kv.History(ctx, jetstreamstore.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, nil
	}
	if err != nil {
		return leaseStatus{}, err
	}
	last := entries[len(entries)-1]
	st.Written, st.Revision, st.Changed = true, last.Revision(), last.Created()
	if last.Operation() == jetstream.KeyValuePut {
		st.Record = lease.Record{Holder: lease.DecodeHolder(last.Value()), Revision: last.Revision()}
	}
	return st, nil
}

// readEpoch reads the epoch key: the record (its revision also when its value is not
// one: an *lease.EpochValueError), or none.
func readEpoch(ctx context.Context, kv jetstream.KeyValue) (lease.EpochRecord, error) {
	e, err := kv.Get(ctx, jetstreamstore.EpochKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return lease.EpochRecord{}, nil
	case err != nil:
		return lease.EpochRecord{}, fmt.Errorf("read the epoch: %w", err)
	}
	rec, err := lease.DecodeEpoch(e.Value())
	rec.Revision = e.Revision()
	return rec, err
}

// epochLine is the epoch as status prints it.
func (s leaseStatus) epochLine() string {
	switch {
	case s.EpochErr != nil:
		return fmt.Sprintf("unreadable (revision %d): %v", s.Epoch.Revision, s.EpochErr)
	case s.Epoch.None():
		return "none (no engine has served under an epoch here)"
	}
	return fmt.Sprintf("%d, %s by %s (revision %d)", s.Epoch.Epoch, s.Epoch.State, s.Epoch.InstanceID, s.Epoch.Revision)
}

func since(now, t time.Time) time.Duration {
	return max(now.Sub(t), 0).Round(time.Second)
}

func (s leaseStatus) print(w io.Writer, now time.Time) {
	switch {
	case !s.BucketExists:
		fmt.Fprintf(w, "no engine has ever held the lease on %s (bucket %s does not exist)\n", s.NATSURL, jetstreamstore.DefaultBucket)
	case !s.Written:
		fmt.Fprintf(w, "the lease is free: no engine has held it on %s since bucket %s was created\n", s.NATSURL, jetstreamstore.DefaultBucket)
		fmt.Fprintf(w, "  epoch:     %s\n", s.epochLine())
	case s.Record.Free():
		fmt.Fprintf(w, "the lease is free: released at revision %d, %s ago (%s)\n",
			s.Revision, since(now, s.Changed), s.Changed.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "  epoch:     %s\n", s.epochLine())
	default:
		h := s.Record.Holder
		fmt.Fprintf(w, "held by %s\n", h)
		fmt.Fprintf(w, "  instance:  %s\n", orUnknown(h.InstanceID))
		fmt.Fprintf(w, "  host:      %s\n", orUnknown(h.Host))
		fmt.Fprintf(w, "  pid:       %d\n", h.PID)
		fmt.Fprintf(w, "  version:   %s\n", orUnknown(h.Version))
		fmt.Fprintf(w, "  rollout:   %s\n", orNone(h.RolloutID))
		fmt.Fprintf(w, "  since:     %s\n", orUnknown(h.StartedAt))
		fmt.Fprintf(w, "  revision:  %d\n", s.Revision)
		fmt.Fprintf(w, "  changed:   %s ago (%s)\n", since(now, s.Changed), s.Changed.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "  epoch:     %s\n", s.epochLine())
		if !h.Known() {
			fmt.Fprintln(w, "  (the lease value is not an abi-engine holder record)")
		}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// statusJSON is the output of status --json. holder has the six keys of the lease
// record (docs/design.md §4.1), null while the lease is free.
type statusJSON struct {
	NATSURL        string        `json:"nats_url"`
	Bucket         string        `json:"bucket"`
	BucketExists   bool          `json:"bucket_exists"`
	Free           bool          `json:"free"`
	Revision       uint64        `json:"revision"`
	Holder         *lease.Holder `json:"holder"`
	ChangedAt      *string       `json:"changed_at"`
	ChangedSeconds *float64      `json:"changed_seconds_ago"`
	// Epoch is the epoch record, null while there is none; EpochError says why a value
	// in the key could not be read as one.
	Epoch      *epochStatusJSON `json:"epoch"`
	EpochError string           `json:"epoch_error,omitempty"`
}

// epochStatusJSON is the epoch record in status --json.
type epochStatusJSON struct {
	Epoch      uint64 `json:"epoch"`
	InstanceID string `json:"instance_id"`
	State      string `json:"state"`
	Revision   uint64 `json:"revision"`
}

func (s leaseStatus) JSON(now time.Time) statusJSON {
	out := statusJSON{
		NATSURL:      s.NATSURL,
		Bucket:       jetstreamstore.DefaultBucket,
		BucketExists: s.BucketExists,
		Free:         s.Record.Free(),
		Revision:     s.Revision,
	}
	if !s.Record.Free() {
		h := s.Record.Holder
		out.Holder = &h
	}
	switch {
	case s.EpochErr != nil:
		out.EpochError = s.EpochErr.Error()
	case !s.Epoch.None():
		out.Epoch = &epochStatusJSON{Epoch: s.Epoch.Epoch, InstanceID: s.Epoch.InstanceID,
			State: s.Epoch.State.String(), Revision: s.Epoch.Revision}
	}
	if s.Written {
		at := s.Changed.UTC().Format(time.RFC3339)
		ago := since(now, s.Changed).Seconds()
		out.ChangedAt, out.ChangedSeconds = &at, &ago
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return runtimeError(err)
	}
	return nil
}

// readDenied is a refusal met by status, which only reads: whatever was refused,
// nothing was changed (a refused subscription's "may have run" is for commands that
// ask for something).
func readDenied(d *DeniedError) error {
	return fmt.Errorf("the broker refused this user's %s to %q (no permission for it; docs/security.md lists the permissions of each command): status only reads, nothing was changed",
		d.Operation, d.Subject)
}
