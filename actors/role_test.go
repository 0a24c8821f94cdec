package actors

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/anthdm/hollywood/actor"
)

// testMember plays a role with nothing but the shared parts (RoleQueue, StartStep,
// TakeRole, RoleCommand.Answer): its one step per command runs work. A Stop cuts the
// step running short, as the transfer hosts do.
type testMember struct {
	queue  RoleQueue
	steps  *Group
	gone   chan struct{}
	cancel context.CancelFunc // the running step's
	work   func(ctx context.Context, cmd *RoleCommand) error
}

// stepErr carries a step's error in its result (a nil error is no result at all).
type stepErr struct{ err error }

func (m *testMember) Receive(c *actor.Context) {
	switch msg := c.Message().(type) {
	case actor.Stopped:
		close(m.gone)
	case *RoleStep:
		if msg.Cmd != m.queue.Current() {
			return
		}
		m.queue.Done().Answer(c, c.PID(), msg.Result().(stepErr).err)
		m.next(c)
	default:
		cmd, ok := TakeRole(msg, c.Sender())
		if !ok {
			return
		}
		if cmd.Stops() && m.cancel != nil {
			m.cancel()
		}
		m.queue.Push(cmd)
		m.next(c)
	}
}

func (m *testMember) next(c *actor.Context) {
	m.queue.Run(func(cmd *RoleCommand) bool {
		parent := cmd.Ctx
		if parent == nil {
			parent = context.Background()
		}
		ctx, cancel := context.WithCancel(parent)
		m.cancel = cancel
		_, ok := StartStep(m.steps, c.Engine(), c.PID(), cmd, func() any {
			defer cancel()
			return stepErr{m.work(ctx, cmd)}
		})
		return ok
	})
}

// roleRig is a member on an engine and an actor that sends it role messages and keeps
// every reply.
type roleRig struct {
	e       *actor.Engine
	member  *testMember
	pid     *actor.PID
	from    *actor.PID
	replies chan any
}

func newRoleRig(t *testing.T, work func(ctx context.Context, cmd *RoleCommand) error) *roleRig {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := &roleRig{e: e, replies: make(chan any, 16)}
	r.member = &testMember{steps: NewGroup(), gone: make(chan struct{}), work: work}
	r.pid = e.Spawn(func() actor.Receiver { return r.member }, "member")
	r.from = e.SpawnFunc(func(c *actor.Context) {
		switch m := c.Message().(type) {
		case Accepting, ServeFailed, Drained, Down:
			r.replies <- m
		}
	}, "sender")
	return r
}

func (r *roleRig) tell(msg any) { r.e.SendWithSender(r.pid, msg, r.from) }

// replied is every reply received once the bubble is blocked.
func (r *roleRig) replied() []any {
	synctest.Wait()
	var got []any
	for {
		select {
		case m := <-r.replies:
			got = append(got, m)
		default:
			return got
		}
	}
}

// TestRoleQueueRunsOneStepAtATime: role commands sent back to back run in the order
// received, each step starting only once the one before has reported, and each is
// answered with its role reply.
func TestRoleQueueRunsOneStepAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, most, started atomic.Int64
		release := make(chan struct{})
		r := newRoleRig(t, func(ctx context.Context, cmd *RoleCommand) error {
			started.Add(1)
			n := running.Add(1)
			defer running.Add(-1)
			if n > most.Load() {
				most.Store(n)
			}
			<-release
			return nil
		})
		r.tell(Serve{})
		r.tell(StopAccepting{})
		r.tell(Serve{})
		if got := r.replied(); len(got) != 0 || started.Load() != 1 {
			t.Fatalf("before the first step reported: %d steps started, replies %v; want 1, none", started.Load(), got)
		}
		want := []any{Accepting{From: r.pid, On: true}, Accepting{From: r.pid, On: false}, Accepting{From: r.pid, On: true}}
		for i, w := range want {
			release <- struct{}{}
			got := r.replied()
			if len(got) != 1 || got[0] != w {
				t.Fatalf("after step %d: replies %v, want %v", i+1, got, w)
			}
			if i < len(want)-1 && started.Load() != int64(i+2) {
				t.Fatalf("after step %d: %d steps started, want %d", i+1, started.Load(), i+2)
			}
		}
		if most.Load() != 1 {
			t.Fatalf("%d steps ran at once, want 1", most.Load())
		}
		if err := r.member.steps.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRoleStepFailing: a failed Serve step is answered ServeFailed with its error, and
// the commands behind it still run.
func TestRoleStepFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		r := newRoleRig(t, func(ctx context.Context, cmd *RoleCommand) error {
			if _, ok := cmd.Msg.(Serve); ok {
				return boom
			}
			return nil
		})
		r.tell(Serve{})
		r.tell(Stop{})
		got := r.replied()
		if len(got) != 2 {
			t.Fatalf("replies %v, want ServeFailed then Down", got)
		}
		if f, ok := got[0].(ServeFailed); !ok || !errors.Is(f.Err, boom) || f.From != r.pid {
			t.Fatalf("first reply %v, want ServeFailed from the member with the step's error", got[0])
		}
		if got[1] != (Down{From: r.pid}) {
			t.Fatalf("second reply %v, want Down", got[1])
		}
	})
}

// TestRoleStopWhileAStepRuns: a Stop that arrives while a step waits cuts it short
// (the member cancels its context) and runs once it has reported; no step goroutine
// outlives the commands.
func TestRoleStopWhileAStepRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRoleRig(t, func(ctx context.Context, cmd *RoleCommand) error {
			if _, ok := cmd.Msg.(Serve); ok {
				<-ctx.Done() // a broker that never answers
				return ctx.Err()
			}
			return nil
		})
		r.tell(Serve{})
		if got := r.replied(); len(got) != 0 {
			t.Fatalf("replies %v while Serve's step waits", got)
		}
		r.tell(Stop{})
		got := r.replied()
		if len(got) != 2 {
			t.Fatalf("replies %v, want ServeFailed then Down", got)
		}
		if f, ok := got[0].(ServeFailed); !ok || !errors.Is(f.Err, context.Canceled) {
			t.Fatalf("first reply %v, want ServeFailed (cut short)", got[0])
		}
		if got[1] != (Down{From: r.pid}) {
			t.Fatalf("second reply %v, want Down", got[1])
		}
		if n := r.member.steps.Running(); n != 0 {
			t.Fatalf("%d step goroutines still run", n)
		}
	})
}

// TestAskRole: a method's command is answered on its reply, not by message; ctx ends
// the wait with its cause while the step goes on; the member's actor stopping before
// it answers is ErrMemberGone.
func TestAskRole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := newRoleRig(t, func(ctx context.Context, cmd *RoleCommand) error {
			if _, ok := cmd.Msg.(StopAccepting); ok {
				return errors.New("unconfirmed")
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
		tell := func(ask RoleAsk) { r.e.Send(r.pid, ask) }

		done := make(chan error, 1)
		go func() { done <- AskRole(context.Background(), tell, Serve{}, r.member.gone) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("AskRole returned %v before the step ended", err)
		default:
		}
		release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatalf("AskRole(Serve) = %v, want nil", err)
		}
		if err := AskRole(context.Background(), tell, StopAccepting{}, r.member.gone); err == nil || err.Error() != "unconfirmed" {
			t.Fatalf("AskRole(StopAccepting) = %v, want the step's error", err)
		}
		if got := r.replied(); len(got) != 0 {
			t.Fatalf("a method's commands were answered by message too: %v", got)
		}

		why := errors.New("the caller gave up")
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() { done <- AskRole(ctx, tell, Serve{}, r.member.gone) }()
		synctest.Wait()
		cancel(why)
		if err := <-done; !errors.Is(err, why) {
			t.Fatalf("AskRole with its ctx ended = %v, want the cause", err)
		}

		// The step of the Serve above ended with its ctx; this one waits, and is never
		// answered: the actor stops first.
		go func() { done <- AskRole(context.Background(), tell, Serve{}, r.member.gone) }()
		synctest.Wait()
		<-r.e.Poison(r.pid).Done()
		if err := <-done; !errors.Is(err, ErrMemberGone) {
			t.Fatalf("AskRole to an actor that stopped = %v, want ErrMemberGone", err)
		}
		close(release)
		if err := r.member.steps.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRoleQueue: the queue's own bookkeeping, without an actor.
func TestRoleQueue(t *testing.T) {
	var q RoleQueue
	serve, stop, closing := &RoleCommand{Msg: Serve{}}, &RoleCommand{Msg: Stop{}}, &RoleCommand{Msg: CloseRole{}}
	q.Push(serve)
	q.Push(stop)
	if !q.StopQueued() {
		t.Fatal("a waiting Stop is not seen")
	}
	var begun []*RoleCommand
	q.Run(func(cmd *RoleCommand) bool { begun = append(begun, cmd); return true })
	if len(begun) != 1 || q.Current() != serve {
		t.Fatalf("Run began %d commands, current %v; want only Serve, current", len(begun), q.Current())
	}
	q.Run(func(cmd *RoleCommand) bool { t.Fatal("Run began a command while a step runs"); return true })
	if q.Done() != serve || q.Current() != nil {
		t.Fatal("Done did not end Serve")
	}
	q.Push(closing)
	q.Run(func(cmd *RoleCommand) bool { return cmd == closing })
	if q.Current() != closing || !q.StopQueued() {
		t.Fatalf("current %v, want Close (Stop answered at once, Close stepping)", q.Current())
	}
	if got := q.Drain(); len(got) != 1 || got[0] != closing || q.Current() != nil || q.StopQueued() {
		t.Fatalf("Drain = %v, want [Close] and an empty queue", got)
	}
}

// TestRoleAnswerOnce: a method's command is answered once, even when handled again
// after a crash; a Close owes no role reply.
func TestRoleAnswerOnce(t *testing.T) {
	reply := make(chan error, 1)
	cmd, ok := TakeRole(RoleAsk{Msg: CloseRole{}, Reply: reply}, nil)
	if !ok || !cmd.Closes() || !cmd.Stops() || cmd.Name() != "close" {
		t.Fatalf("TakeRole(RoleAsk{CloseRole}) = %+v, %v", cmd, ok)
	}
	cmd.Answer(nil, nil, nil)
	cmd.Reply = reply // as a command taken again would carry it
	cmd.Answer(nil, nil, errors.New("again"))
	if err := <-reply; err != nil {
		t.Fatalf("first answer %v, want nil", err)
	}
	if RoleReply(CloseRole{}, nil, nil) != nil {
		t.Fatal("Close has a role reply")
	}
	if _, ok := TakeRole(Drained{}, nil); ok {
		t.Fatal("Drained taken as a role command")
	}
}

// TestRolePhaseNames: every phase has its name; an unknown one says its number.
func TestRolePhaseNames(t *testing.T) {
	for ph := RoleIdle; ph <= RoleClosed; ph++ {
		if s := ph.String(); strings.HasPrefix(s, "phase(") {
			t.Errorf("phase %d has no name", int(ph))
		}
	}
	if s := RolePhase(0).String(); s != "phase(0)" {
		t.Errorf("the zero phase is %q", s)
	}
}
