package actors

import (
	"context"
	"errors"
)

// ErrMemberGone is what a method's role command gets when the member's actor stopped
// before it answered (poisoned by its spawner, or by the member's Close).
var ErrMemberGone = errors.New("actors: the member's actor stopped before it answered")

// AskRole hands msg (Serve, StopAccepting, Stop or CloseRole) to a member's actor as a
// RoleAsk, through tell, and waits for its answer (AwaitRole).
func AskRole(ctx context.Context, tell func(RoleAsk), msg any, gone <-chan struct{}) error {
	reply := make(chan error, 1)
	tell(RoleAsk{Msg: msg, Ctx: ctx, Reply: reply})
	return AwaitRole(ctx, reply, gone)
}

// AwaitRole waits for a role command's answer on reply; or for ctx to end (its cause);
// or for gone to close, the end of the actor instance the command went to: then
// ErrMemberGone, unless the answer came just before.
func AwaitRole(ctx context.Context, reply <-chan error, gone <-chan struct{}) error {
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-gone:
		select {
		case err := <-reply: // answered as it stopped
			return err
		default:
			return ErrMemberGone
		}
	}
}
