// Package procstate tells whether another process has stopped. A SIGSTOP takes effect
// when every thread of the process has reached the kernel's stop, which is not when
// kill(2) returns: on a loaded (virtual) machine a thread may run on for milliseconds
// and answer calls sent after the signal. Tests and the chaos harness that pause an
// engine wait for the stop before they act on it.
package procstate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrUnsupported is returned where the system has no /proc to read the state from.
var ErrUnsupported = errors.New("procstate: no /proc on this system")

// Stopped reports whether every thread of pid is stopped (state T or t in
// /proc/<pid>/task/*/stat). A process that has exited (or was reaped) is not stopped
// and reports os.ErrNotExist.
func Stopped(pid int) (bool, error) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return false, ErrUnsupported
	}
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, err
	}
	if len(stats) == 0 {
		return false, fmt.Errorf("procstate: process %d: %w", pid, os.ErrNotExist)
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended since the glob
		}
		if err != nil {
			return false, err
		}
		switch state(string(b)) {
		case "T", "t":
		case "Z", "X":
			return false, fmt.Errorf("procstate: process %d has exited: %w", pid, os.ErrNotExist)
		default:
			return false, nil
		}
	}
	return true, nil
}

// state is the state letter of a stat line: the field after the command, which is in
// parentheses and may itself hold spaces or parentheses.
func state(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(stat[i+1:])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// WaitStopped waits until every thread of pid is stopped, polling every millisecond
// (another process's state can only be polled), or ctx ends. Without /proc there is
// nothing to wait on: it returns nil at once, and the caller goes on as if the signal
// took effect when sent.
func WaitStopped(ctx context.Context, pid int) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		ok, err := Stopped(pid)
		if errors.Is(err, ErrUnsupported) {
			return nil
		}
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("procstate: process %d not stopped: %w", pid, context.Cause(ctx))
		case <-t.C:
		}
	}
}
