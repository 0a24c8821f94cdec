// Package testproc holds what tests that run other processes (abi-engine, the Python
// SDK, helpers) need besides the processes themselves: an output the process writes
// while the test reads it, and a free loopback port to hand a process.
package testproc

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Output collects what a process writes, safe for the process's writer and the test's
// reader at once (exec.Cmd copies a pipe into it on a goroutine of its own).
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// Close does nothing: an Output can stand where an io.WriteCloser is asked.
func (o *Output) Close() error { return nil }

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// FreePort is a loopback port nothing listens on right now. Another process may take it
// before the one it is meant for binds it; tests that cannot bear that pass ":0" and
// read the bound address back instead.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
