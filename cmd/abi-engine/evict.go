package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/abi-engine/engine/control"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

func (c *cli) evictCommand() *cobra.Command {
	var conn connFlags
	var instance string
	var force bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "evict",
		Short: "Remove a wedged or vanished lease holder",
		Long: `evict is for a holder that is wedged or gone. Without --force it asks the holder to
step down (as abi-engine step-down does) and waits for a successor. With --force it
deletes the lease by compare-and-swap on the revision it read: a standby takes the lease
at once and moves the epoch on, so the evicted holder's next renewal fails, it fences
and ends as lost, and the shared backends refuse its writes. --instance ID names the
holder meant (as abi-engine status shows it): when another engine holds the lease by
then, nothing is deleted.

Exit codes: 0 evicted (or handed over); 3 without --force, no standby qualifies; 1
otherwise (without --force, a holder that does not answer: use --force).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if instance != "" && !force {
				return usageError(&flagError{errors.New("--instance goes with --force: without it, evict asks the holder the lease names")})
			}
			if !force {
				return c.stepDown(cmd, &conn, control.StepDownRequest{}, timeout)
			}
			return c.forceEvict(cmd, &conn, instance)
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVar(&force, "force", false, "delete the lease at the revision read, without asking the holder")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultHandoverTimeout, "without --force: how long to wait for the successor")
	cmd.Flags().StringVar(&instance, "instance", "", "with --force: the instance id of the holder to evict; refused, nothing deleted, when the lease names another")
	return cmd
}

// forceEvict deletes the lease at the revision it read, when it names instance (any
// holder when instance is "").
func (c *cli) forceEvict(cmd *cobra.Command, conn *connFlags, instance string) error {
	b, err := c.brokerFor(cmd, conn)
	if err != nil {
		return err
	}
	nc, err := connect(b, "abi-engine evict")
	if err != nil {
		return err
	}
	defer nc.Close()
	watched, _, stop := whenDenied(cmd.Context(), nc)
	defer stop()
	ctx, cancel := context.WithTimeout(watched, b.Timeout)
	defer cancel()
	kv, err := leaseKV(ctx, nc, b.Domain)
	if d := denied(ctx); d != nil {
		return runtimeError(d)
	}
	if err != nil {
		return runtimeError(err)
	}
	e, err := kv.Get(ctx, jetstreamstore.Key)
	if d := denied(ctx); d != nil {
		return runtimeError(d)
	}
	if err != nil {
		return runtimeError(fmt.Errorf("read the engine lease: %w (a free lease needs no eviction)", err))
	}
	h := lease.DecodeHolder(e.Value())
	if instance != "" && h.InstanceID != instance {
		return runtimeError(fmt.Errorf("the lease is held by %s, not by %s (revision %d): nothing was deleted; run abi-engine status", h, instance, e.Revision()))
	}
	err = kv.Delete(ctx, jetstreamstore.Key, jetstream.LastRevision(e.Revision()))
	if d := denied(ctx); d != nil {
		return runtimeError(d)
	}
	switch jserr.Classify(err) {
	case jserr.Committed:
	case jserr.Conflict, jserr.Undecided:
		return runtimeError(fmt.Errorf("the lease changed after it was read at revision %d (held by %s): nothing was deleted; run abi-engine status, then evict again if it is still wedged", e.Revision(), h))
	default:
		return runtimeError(fmt.Errorf("delete the engine lease at revision %d: %w (it may or may not be deleted: run abi-engine status)", e.Revision(), err))
	}
	fmt.Fprintf(c.stdout, "evicted %s: the lease was deleted at revision %d; a standby takes it at once and moves the epoch on, and the evicted engine's writes are refused\n", h, e.Revision())
	return nil
}
