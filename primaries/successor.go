package primaries

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/protocol"
)

// The handover's successor check (actors.RootConfig.Successor): the old engine keeps
// its subscriptions until the broker shows the new holder's in place.

const (
	// probeFirst and probeMax pace the $SRV.INFO requests of WaitSuccessor: the first
	// answer a successor can give comes within milliseconds of its subscribing, and
	// the pace only sets how long both engines share the queue group, never a gap.
	probeFirst = 2 * time.Millisecond
	probeMax   = 20 * time.Millisecond
	// probeBuffer holds the INFO replies of one round (ours, the successor's, any other
	// engine's); a reply dropped for lack of room is asked for again next round.
	probeBuffer = 64
)

// WaitSuccessor waits until the engine instance answers at the broker for the services
// of every primary in ps: for each, a $SRV.INFO of the service from instance (its
// micro metadata instance_id) that lists every endpoint of ours, on micro's queue
// group. Such a reply proves its endpoint subscriptions are at the broker: micro lists
// an endpoint only once it has subscribed it, and the broker handles a connection's
// SUBs before a reply the connection sent after them. It asks on nc, or on each
// primary's own connection when nc is nil; a connection the primaries do not serve on
// keeps our own INFO answers from being replies a connection sends to itself, which a
// broker granting responses only (allow_responses, docs/security.md) may refuse. It
// returns ctx's error when ctx ends first.
//
// A primary with no subscriptions (it never served, or its Serve failed: a member that
// cannot serve) is skipped: no caller of its service can meet "no responders" because
// of our unsubscribing, and a successor that cannot serve it either would otherwise
// hold every other service of ours in the queue group with its own until the phase's
// deadline (lease/4 of overlap, for nothing).
func WaitSuccessor(ctx context.Context, nc *nats.Conn, instance string, ps ...*Primary) error {
	for _, p := range ps {
		if !p.subscribed() {
			continue
		}
		if err := p.waitSuccessor(ctx, nc, instance); err != nil {
			return err
		}
	}
	return nil
}

// subscribed reports whether p may hold subscriptions now: it serves, or is on its way
// to or from serving.
func (p *Primary) subscribed() bool {
	switch p.view.Load().phase {
	case actors.RoleIdle, actors.RoleStopped, actors.RoleClosed:
		return false
	}
	return true
}

// waitSuccessor asks $SRV.INFO.<service> on p's connection, again and again at a
// pace that slows from probeFirst to probeMax, until instance answers for every
// endpoint of p's.
func (p *Primary) waitSuccessor(ctx context.Context, nc *nats.Conn, instance string) error {
	if nc == nil {
		nc = p.cfg.Conn
	}
	subject, err := micro.ControlSubject(micro.InfoVerb, p.svc.Name, "")
	if err != nil {
		return fmt.Errorf("primaries: the INFO subject of %q: %w", p.svc.Name, err)
	}
	want := make([]string, len(p.ops))
	for i, op := range p.ops {
		want[i] = protocol.ServiceSubject(p.svc.Name, op)
	}
	// Each request has a reply subject of its own under one inbox: a broker that
	// grants responses per request (allow_responses, docs/security.md) counts the
	// engines answering one request, and one reply subject asked again before its
	// answers came would be one request's allowance for several answers.
	inbox := nc.NewInbox()
	replies := make(chan *nats.Msg, probeBuffer)
	sub, err := nc.ChanSubscribe(inbox+".*", replies)
	if err != nil {
		return fmt.Errorf("primaries: subscribe for the INFO of %q: %w", p.svc.Name, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	timer := time.NewTimer(0)
	defer timer.Stop()
	pace := probeFirst
	for asked := 0; ; {
		select {
		case m := <-replies:
			if servedBy(m.Data, instance, want) {
				return nil
			}
		case <-timer.C:
			asked++
			if err := nc.PublishRequest(subject, inbox+"."+strconv.Itoa(asked), nil); err != nil {
				return fmt.Errorf("primaries: ask %s: %w", subject, err)
			}
			timer.Reset(pace)
			pace = min(2*pace, probeMax)
		case <-ctx.Done():
			return fmt.Errorf("primaries: %q of %s not seen at the broker: %w", p.svc.Name, instance, ctx.Err())
		}
	}
}

// servedBy reports whether info, a micro INFO reply, is instance's and lists every
// subject of want on micro's queue group.
func servedBy(info []byte, instance string, want []string) bool {
	var in micro.Info
	if err := json.Unmarshal(info, &in); err != nil || in.Metadata["instance_id"] != instance {
		return false
	}
	listed := make(map[string]bool, len(in.Endpoints))
	for _, ep := range in.Endpoints {
		if ep.QueueGroup == micro.DefaultQueueGroup {
			listed[ep.Subject] = true
		}
	}
	for _, s := range want {
		if !listed[s] {
			return false
		}
	}
	return true
}
