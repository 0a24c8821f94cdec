// Package main is the abi-engine binary: it runs an engine and inspects the one
// serving a NATS account (docs/design.md §4.6):
//
//	abi-engine run [--config F] [--role R] [--nats URL] [--http ADDR] [--log-format json|console] [--log-level L]
//	abi-engine status [--nats URL] [--json]
//	abi-engine call SERVICE OPERATION [JSON] [--nats URL] [--timeout D]
//	abi-engine config check [--config F] [--rollout ID]
//	abi-engine version
//
// Exit codes: 0 ok, 1 runtime error, 2 usage or configuration error, 3 another engine
// serves (the message names it).
//
// run starts an engine in its role and keeps it until SIGTERM, SIGINT or SIGHUP: the first
// signal hands over (jobs stop, the lease is released, the calls and sessions already
// received are answered for up to drain_seconds) and the process exits 0 once that is
// done; a second signal cuts the handover short. An engine that ends on its own (it
// lost the lease, or a standby was never handed it) exits 1.
//
// status and call are clients: they read the configuration only to find the broker
// (--nats, else ABI_NATS_URL, else nats.url of abi-engine.yaml in the working
// directory, else the embedded broker's address, nats://127.0.0.1:4222 by default) and
// its credentials. status reads the lease without creating its bucket.
//
// The version is set at build time with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/abi-engine
//
// and otherwise read from the module's build information.
package main
