// Package fault holds the fault injectors of the chaos harness that work on anything
// reachable over TCP or as a process, with no knowledge of the engine:
//
//   - Proxy, a TCP proxy put between one engine and the broker, that cuts the
//     connection without closing it (a partition the broker does not notice), resets
//     it, or delays every byte;
//   - Process, an engine binary run as a child process that can be sent SIGKILL,
//     SIGSTOP, SIGCONT or SIGTERM and waited for with its exit code;
//   - PutLease, which writes a foreign value into the lease key.
//
// Every goroutine an injector starts is owned by it: Proxy.Close and the end of a
// Process wait for theirs.
package fault
