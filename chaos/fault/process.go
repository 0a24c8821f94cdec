package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/abi-engine/engine/internal/procstate"
)

// Process is a child process (an engine binary) that a scenario controls with signals.
// It is started in a process group of its own, so a Ctrl-C meant for the harness does
// not reach it, and on Linux it dies with the harness.
type Process struct {
	Name string

	cmd  *exec.Cmd
	done chan struct{}
	out  io.Closer

	mu       sync.Mutex
	exited   time.Time
	code     int
	signaled syscall.Signal
	waitErr  error
}

// StartProcess runs binary with args and env (added to the harness's own environment),
// its standard output and error going to output (closed when the process ends; nil
// discards them).
func StartProcess(name, binary string, args, env []string, output io.WriteCloser) (*Process, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	if output != nil {
		cmd.Stdout, cmd.Stderr = output, output
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		if output != nil {
			output.Close()
		}
		return nil, fmt.Errorf("start %s (%s): %w", name, binary, err)
	}
	p := &Process{Name: name, cmd: cmd, done: make(chan struct{}), out: output}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.exited = time.Now()
	p.code = p.cmd.ProcessState.ExitCode()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.signaled = ws.Signal()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		p.waitErr = err
	}
	p.mu.Unlock()
	if p.out != nil {
		p.out.Close()
	}
	close(p.done)
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode is the exit code once exited: -1 when a signal ended it (see Signaled).
func (p *Process) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code
}

// Signaled is the signal that ended the process, 0 when it exited by itself.
func (p *Process) Signaled() syscall.Signal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signaled
}

// ExitedAt is when the harness saw the process end; zero while it runs.
func (p *Process) ExitedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Signal sends sig to the process; a process that has exited is not an error.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s (pid %d): send %s: %w", p.Name, p.PID(), sig, err)
	}
	return nil
}

// Kill sends SIGKILL.
func (p *Process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Pause sends SIGSTOP and returns once every thread of the process has stopped (or it
// has exited): the stop takes effect after kill(2) returns, and on a loaded machine a
// thread may run on for tens of milliseconds, answering calls the scenario sends as if
// to a paused engine. Without /proc it returns once the signal is sent.
func (p *Process) Pause() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pauseBound)
	defer cancel()
	err := procstate.WaitStopped(ctx, p.PID())
	switch {
	case err == nil, errors.Is(err, os.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("%s (pid %d): SIGSTOP: %w", p.Name, p.PID(), err)
	}
}

// pauseBound is how long Pause waits for the stop to take effect.
const pauseBound = 10 * time.Second

// Resume sends SIGCONT.
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }

// Terminate sends SIGTERM.
func (p *Process) Terminate() error { return p.Signal(syscall.SIGTERM) }

// Wait waits until the process exits or ctx ends, and returns its exit code.
func (p *Process) Wait(ctx context.Context) (int, error) {
	if p.Exited() {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.code, p.waitErr
	}
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.code, p.waitErr
	case <-ctx.Done():
		return 0, fmt.Errorf("%s (pid %d) still running: %w", p.Name, p.PID(), ctx.Err())
	}
}

// Stop ends the process however it must: SIGCONT (a paused process cannot act on
// anything else), SIGTERM, and SIGKILL when it has not exited within grace. It returns
// once the process has been waited for.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Resume()
	_ = p.Terminate()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	_ = p.Kill()
	<-p.done
}
