package procstate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/abi-engine/engine/internal/testwait"
)

func TestState(t *testing.T) {
	for stat, want := range map[string]string{
		"123 (abi-engine) S 1 123":    "S",
		"123 (a) b) (c) T 1 123":      "T",
		"123 (sp ace) t 1":            "t",
		"garbage with no parenthesis": "",
		"1 (x)":                       "",
	} {
		if got := state(stat); got != want {
			t.Errorf("state(%q) = %q, want %q", stat, got, want)
		}
	}
}

func TestWaitStoppedFollowsAChild(t *testing.T) {
	if _, err := Stopped(os.Getpid()); errors.Is(err, ErrUnsupported) {
		t.Skip(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to run: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	pid := cmd.Process.Pid

	if ok, err := Stopped(pid); ok || err != nil {
		t.Fatalf("a running child: stopped %v, %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	err := WaitStopped(ctx, pid)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitStopped on a running child until its context ended: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := WaitStopped(t.Context(), pid); err != nil {
		t.Fatalf("WaitStopped after SIGSTOP: %v", err)
	}
	if ok, err := Stopped(pid); !ok || err != nil {
		t.Fatalf("after WaitStopped: stopped %v, %v", ok, err)
	}

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the child running again", func() bool {
		ok, err := Stopped(pid)
		return !ok && err == nil
	})

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testwait.Closed(t, exited, 10*time.Second, "the child to exit")
	if _, err := Stopped(pid); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an exited child: %v, want os.ErrNotExist", err)
	}
	if err := WaitStopped(t.Context(), pid); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WaitStopped on an exited child: %v, want os.ErrNotExist", err)
	}
}
