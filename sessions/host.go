package sessions

import "context"

// Host is anything that owns sessions or calls the engine must let finish before it
// closes: every ServicePrimary (its calls in flight are sessions), every TransferHost
// and the overflow host. The handover drives it in this order: StopAccepting, then
// SessionsFinished (twice, see WaitForSessions), then Stop.
type Host interface {
	// StopAccepting ends the host's shared (queue-grouped) subscriptions at the broker
	// and returns once the broker has confirmed it: no new call or session reaches this
	// host afterwards. Everything already received goes on.
	StopAccepting(ctx context.Context) error
	// SessionsFinished returns nil once nothing is open, or ctx's error. It must return
	// when ctx ends: WaitForSessions waits for every host it asked.
	SessionsFinished(ctx context.Context) error
	// Stop ends everything at once: subscriptions, running calls (cancelled) and open
	// sessions (closed). It is safe to call more than once.
	Stop()
}
