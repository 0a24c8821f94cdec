package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/control"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/redact"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// defaultHandoverTimeout bounds how long step-down and evict wait for a successor.
const defaultHandoverTimeout = time.Minute

func (c *cli) stepDownCommand() *cobra.Command {
	var conn connFlags
	var to string
	var timeout time.Duration
	var stay bool
	cmd := &cobra.Command{
		Use:   "step-down",
		Short: "Ask the serving engine to hand over to a standby",
		Long: `step-down asks the engine that holds the lease (a request to its instance, on
abi.engine.v1.control.<instance>.step_down) to hand over, and waits until another
engine holds the lease. Without --to the standby that has waited longest takes it;
with --to only a standby of that rollout takes it at once (the others go on waiting).
The old engine runs the same handover as after SIGTERM (jobs stop, release, drain)
and exits 0, or with --stay starts again as a hot standby.

Exit codes: 0 handed over; 3 no standby qualifies (nothing was changed); 2 a bad flag,
such as --to with an id no rollout can have (nothing was asked); 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.stepDown(cmd, &conn, control.StepDownRequest{To: to, Stay: stay}, timeout)
		},
	}
	conn.add(cmd)
	cmd.Flags().StringVar(&to, "to", "", "hand over only to a standby of this rollout id")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultHandoverTimeout, "how long to wait for the successor to hold the lease")
	cmd.Flags().BoolVar(&stay, "stay", false, "the old engine stays, as a hot standby, instead of exiting")
	return cmd
}

// stepDown asks the holder to step down with req and waits for a successor.
func (c *cli) stepDown(cmd *cobra.Command, conn *connFlags, req control.StepDownRequest, timeout time.Duration) error {
	if timeout <= 0 {
		return usageError(&flagError{fmt.Errorf("--timeout %s must be positive", timeout)})
	}
	// An id no engine can have would otherwise reach the holder and come back as "no
	// standby qualifies" (exit 3), as if the deploy were short of a standby.
	if err := config.CheckRolloutID(req.To); err != nil {
		return usageError(&flagError{fmt.Errorf("--to %w", err)})
	}
	b, err := c.brokerFor(cmd, conn)
	if err != nil {
		return err
	}
	nc, err := connect(b, "abi-engine step-down")
	if err != nil {
		return err
	}
	defer nc.Close()
	watched, _, stop := whenDenied(cmd.Context(), nc)
	defer stop()
	ctx, cancel := context.WithTimeout(watched, timeout)
	defer cancel()
	holder, err := servingHolder(ctx, nc, b)
	if d := denied(ctx); d != nil {
		return runtimeError(d)
	}
	if err != nil {
		return err
	}
	kv, err := leaseKV(ctx, nc, b.Domain)
	if d := denied(ctx); d != nil {
		return runtimeError(d)
	}
	if err != nil {
		return runtimeError(err)
	}
	// Watch before asking, so the successor's write cannot be missed.
	w, err := kv.Watch(ctx, jetstreamstore.Key, jetstream.UpdatesOnly())
	if d := denied(ctx); d != nil {
		return runtimeError(d)
	}
	if err != nil {
		return runtimeError(fmt.Errorf("watch the engine lease: %w", err))
	}
	defer w.Stop() //nolint:errcheck // ends with the command
	// A wedged holder never answers: the request is bounded like any call
	// (nats.client_timeout_seconds), the wait for the successor by --timeout.
	reqCtx, cancelReq := context.WithTimeout(ctx, b.Timeout+control.RollCallWindow)
	successor, err := control.RequestStepDown(reqCtx, nc, holder.InstanceID, req)
	cancelReq()
	switch d := denied(ctx); {
	case d != nil:
		return runtimeError(d)
	case errors.Is(err, control.ErrNoStandby):
		return &exitError{Code: exitServing, Err: fmt.Errorf("%s keeps serving: %w", holder, err)}
	case errors.Is(err, control.ErrNotServing):
		// Another step-down or an eviction came first: the lease may already be another
		// engine's, which an eviction would hit.
		return runtimeError(err)
	case err != nil:
		return runtimeError(fmt.Errorf("%w; for a holder that is wedged or gone: abi-engine evict --force --instance %s", err, holder.InstanceID))
	}
	want := control.TargetFor(successor, req.To)
	fmt.Fprintf(c.stdout, "%s is handing over to %s\n", holder.InstanceID, want)
	for {
		select {
		case <-ctx.Done():
			if d := denied(ctx); d != nil {
				return runtimeError(d)
			}
			return runtimeError(fmt.Errorf("no successor holds the lease within %s (the handover to %s was begun; abi-engine status shows where it is)", timeout, want))
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			h := lease.DecodeHolder(e.Value())
			if _, form := h.Handoff(); form || h.InstanceID == holder.InstanceID {
				continue // the released-to form, or the old holder still
			}
			if !want.Names(h) {
				return runtimeError(fmt.Errorf("the lease was taken by %s, not by %s (the one named died, or did not answer in time)", h, want))
			}
			fmt.Fprintf(c.stdout, "handed over: %s holds the lease (revision %d)\n", h, e.Revision())
			return nil
		}
	}
}

// servingHolder reads the lease and returns its holder, or an error (exit 1) when no
// engine holds it.
func servingHolder(ctx context.Context, nc *nats.Conn, b brokerSettings) (lease.Holder, error) {
	url := b.URL
	st, err := readLease(ctx, nc, b.Domain)
	if err != nil {
		return lease.Holder{}, runtimeError(fmt.Errorf("read the engine lease on %s: %w", redact.String(url), err))
	}
	h := st.Record.Holder
	switch {
	case st.Record.Free():
		return lease.Holder{}, runtimeError(fmt.Errorf("no engine holds the lease on %s: nothing to hand over", redact.String(url)))
	case !h.Known():
		return lease.Holder{}, runtimeError(errors.New("the lease value is not an abi-engine holder record: use abi-engine evict --force"))
	}
	if t, ok := h.Handoff(); ok {
		return lease.Holder{}, runtimeError(fmt.Errorf("%s already released the lease to %s: a handover is under way", h.InstanceID, t))
	}
	return h, nil
}

// leaseKV opens the lease bucket without creating it.
func leaseKV(ctx context.Context, nc *nats.Conn, domain string) (jetstream.KeyValue, error) {
	js, err := jsdomain.New(nc, domain)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, jetstreamstore.DefaultBucket)
	if err != nil {
		return nil, fmt.Errorf("open the lease bucket %s: %w", jetstreamstore.DefaultBucket, err)
	}
	return kv, nil
}
