// Package supervisor holds the process side of abi-engine as suture services: the
// embedded nats-server (Broker), the NATS connections (Dial makes one, Conn holds it),
// the HTTP endpoints (HTTP: /healthz, /readyz, /status, /metrics), the signal handler
// (Signals) and the suture tree that runs them (NewTree), with suture's events logged
// through zap.
//
// Every service follows suture's contract: Serve blocks until its context ends, owns
// every goroutine it starts, and returns only when they are gone.
package supervisor
