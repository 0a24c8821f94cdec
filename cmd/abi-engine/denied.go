package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go"
)

// DeniedError is a publish or subscription the broker refused for want of a
// permission. A refused publish was sent to nobody: nothing ran.
type DeniedError struct {
	Operation string // "publish" or "subscription"
	Subject   string
}

func (e *DeniedError) Error() string {
	if e.Operation != "publish" {
		// The request may have been published before the broker refused the
		// subscription its reply needed.
		return fmt.Sprintf("the broker refused this user's %s to %q (no permission for it; docs/security.md lists the permissions of each command): no reply can reach this command, so what it asked may have run",
			e.Operation, e.Subject)
	}
	return fmt.Sprintf("nothing ran: the broker refused this user's %s to %q (no permission for it; docs/security.md lists the permissions of each command)",
		e.Operation, e.Subject)
}

func (e *DeniedError) Is(target error) bool { return target == nats.ErrPermissionViolation }

// whenDenied returns a context that ends, with a *DeniedError as its cause, as soon as
// the broker refuses a permission on nc. nats.go reports a refused publish only on the
// side (the connection's error handler), so a request to a subject the user may not
// publish would otherwise wait for its whole timeout. A refusal of a $SRV subject (a
// question a command asks on the side, whose refusal means only that it cannot ask)
// ends side instead, a context under the first. stop lets nc's handler go.
func whenDenied(ctx context.Context, nc *nats.Conn) (main, side context.Context, stop func()) {
	main, cancelMain := context.WithCancelCause(ctx)
	side, cancelSide := context.WithCancelCause(main)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		switch d := deniedError(err); {
		case d == nil:
		case strings.HasPrefix(d.Subject, "$SRV."):
			cancelSide(d)
		default:
			cancelMain(d)
		}
	})
	return main, side, func() {
		nc.SetErrorHandler(nil)
		cancelSide(context.Canceled)
		cancelMain(context.Canceled)
	}
}

// violation finds the operation and the subject in the broker's text: Permissions
// Violation for Publish to "abi.svc.keyvalue.v1.get" (or Subscription to ...).
var violation = regexp.MustCompile(`(?i)(subscription|publish) to "?([^"\s]+)"?`)

// deniedError reads a permission violation; nil for any other error.
func deniedError(err error) *DeniedError {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	d := &DeniedError{Operation: "publish", Subject: "unknown"}
	if m := violation.FindStringSubmatch(err.Error()); m != nil {
		d.Operation, d.Subject = strings.ToLower(m[1]), m[2]
	}
	return d
}

// denied is the cause of ctx's end when the broker refused a permission, else nil.
func denied(ctx context.Context) *DeniedError {
	var d *DeniedError
	if errors.As(context.Cause(ctx), &d) {
		return d
	}
	return nil
}
