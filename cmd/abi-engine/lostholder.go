package main

import (
	"context"
	"errors"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/lease"
)

// brokered is an engine that says which broker it used (*engine.Engine).
type brokered interface{ NATSURL() string }

// lostHolderBound bounds the read that names who took a lost lease: the engine has
// ended already, and its exit should not wait on a broker that is away.
const lostHolderBound = 2 * time.Second

// nameLostHolder names the engine that took the lease when the engine lost it without
// learning to whom (its lease was deleted and created again by another engine before
// its own create): it reads the lease as status does, so the exit names the holder
// status would show. Any other error, or a read that fails, is returned as it was.
func nameLostHolder(ctx context.Context, cfg *config.Config, eng runnableEngine, err error) error {
	var lost *lease.LostError
	b, ok := eng.(brokered)
	if !errors.As(err, &lost) || lost.Holder != (lease.Holder{}) || !ok || b.NATSURL() == "" {
		return err
	}
	settings, serr := settingsFor(cfg, b.NATSURL())
	if serr != nil {
		return err
	}
	settings.Timeout = min(settings.Timeout, lostHolderBound)
	nc, cerr := connect(settings, "abi-engine lost lease")
	if cerr != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lostHolderBound)
	defer cancel()
	st, rerr := readLease(ctx, nc, settings.Domain)
	if rerr != nil || st.Record.Free() || st.Record.Holder.InstanceID == eng.InstanceID() {
		return err
	}
	return &lease.LostError{Holder: st.Record.Holder}
}
