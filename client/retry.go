package client

import (
	"fmt"
	"strings"
	"time"
)

// RetryPolicy says how long a call keeps resending while nobody received it ("no
// responders", or an engine that answered UNAVAILABLE with retryable true: fenced, or a
// backend that surely applied nothing). Resending such a call is always safe; a timeout
// or an UNAVAILABLE without retryable is never resent, because the call may have run.
type RetryPolicy struct {
	// Window is how long after the first attempt the last one may start. 0 disables
	// retrying.
	Window time.Duration
	// FirstDelay is the pause after the first failed attempt; each later pause doubles it.
	FirstDelay time.Duration
	// MaxDelay caps the pause.
	MaxDelay time.Duration
	// Margin is kept free before the caller's deadline, so the caller sees "no
	// responders" and can fall back (a transfer open that finds nobody falls back to the
	// unary call) instead of seeing a timeout.
	Margin time.Duration
}

// DefaultRetryPolicy is the policy of the decision's "Retry when nobody answers" (docs/decision.md): a 5 s window, pauses of 50 ms
// doubling up to 500 ms, ending 0.5 s before the caller's deadline.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		Window:     5 * time.Second,
		FirstDelay: 50 * time.Millisecond,
		MaxDelay:   500 * time.Millisecond,
		Margin:     500 * time.Millisecond,
	}
}

// Validate reports a policy that would spin or never pause.
func (p RetryPolicy) Validate() error {
	switch {
	case p.Window < 0:
		return fmt.Errorf("retry window %s is negative; use 0 to disable retrying", p.Window)
	case p.Window == 0:
		return nil
	case p.FirstDelay <= 0:
		return fmt.Errorf("retry first delay %s must be positive when the window is %s", p.FirstDelay, p.Window)
	case p.MaxDelay < p.FirstDelay:
		return fmt.Errorf("retry max delay %s must be at least the first delay %s", p.MaxDelay, p.FirstDelay)
	case p.Margin < 0:
		return fmt.Errorf("retry margin %s is negative", p.Margin)
	}
	return nil
}

// Delay is the pause after the failed attempt number retry (0 for the first attempt):
// FirstDelay doubled retry times, capped at MaxDelay.
func (p RetryPolicy) Delay(retry int) time.Duration {
	d := p.FirstDelay
	for range retry {
		if d >= p.MaxDelay {
			break
		}
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// WindowFor is how long a call whose deadline is timeout away may keep retrying: the
// policy's window, shortened so it ends Margin before the deadline; 0 when no time is
// left for a retry. A call without a deadline (timeout <= 0) gets the whole window.
func (p RetryPolicy) WindowFor(timeout time.Duration) time.Duration {
	if p.Window <= 0 {
		return 0
	}
	if timeout <= 0 {
		return p.Window
	}
	return max(0, min(p.Window, timeout-p.Margin))
}

// Retryable reports whether a call on subject may be resent on "no responders" (or a
// fenced engine's retryable UNAVAILABLE). Only subjects served by whichever engine
// currently serves, through a queue group, qualify:
//
//   - kernel services abi.svc.<service>.v1.<operation...>;
//   - discovery abi.discovery.<project>.v1.<operation...>, except presence;
//   - transfer opens <prefix>.transfer.open.
//
// Everything that names one instance fails at once, since resending cannot reach another
// engine: owner-scoped subjects (<prefix>.<owner>.<operation>, owner = 32 lowercase hex),
// the other transfer operations, presence, agent, job and inbox subjects, $SRV verbs.
// Subjects with wildcards or empty tokens are never retried.
func Retryable(subject string) bool {
	// The tokens are walked without splitting the subject: this runs on every call.
	var head [5]string // the first five tokens
	var prev, last string
	n := 0
	for rest, more := subject, true; more; n++ {
		var tok string
		tok, rest, more = strings.Cut(rest, ".")
		if tok == "" || tok == "*" || tok == ">" || isOwnerID(tok) {
			return false
		}
		if n < len(head) {
			head[n] = tok
		}
		prev, last = last, tok
	}
	if n >= 3 && prev == "transfer" && last == "open" {
		return true
	}
	if n < 5 || head[0] != "abi" || head[3] != "v1" {
		return false
	}
	switch head[1] {
	case "svc":
		// The transfer's session operations go to the engine that opened it.
		return head[4] != "transfer"
	case "discovery":
		return head[4] != "presence"
	}
	return false
}

// isOwnerID reports whether tok is an engine instance id: 32 lowercase hex digits.
func isOwnerID(tok string) bool {
	if len(tok) != 32 {
		return false
	}
	for i := range len(tok) {
		c := tok[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
