// Package leakcheck lists the goroutines the libraries abi-engine uses leak on their
// own, so goleak checks (tests, the chaos harness's NoLeaks) judge only our code.
package leakcheck

import "go.uber.org/goleak"

// Known lists goroutines the libraries leak on their own, for goleak checks of code
// that uses them. Each names the library bug.
//
//   - nats.go v1.55.0 ObjectStore.Put publishes through a temporary JetStream context
//     whose deferred cleanupReplySub sets its status channel to nil; when that runs
//     before the resetPendingAcksOnReconnect goroutine read the channel, the goroutine
//     blocks forever on a nil channel (jetstream/object.go:693, publish.go:570).
//     v1.56.0 hands the goroutine its channel when it starts, so the cleanup's close
//     ends it; the entry stays until runs that met the leak show it gone.
func Known() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
	}
}
