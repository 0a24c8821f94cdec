// Package srvping asks which engines answer a service's subjects: it sends
// $SRV.INFO.<service> (the NATS micro discovery every engine's service answers; INFO
// rather than PING because an engine may already ask INFO, at a handover, under the
// least-privilege permissions) and collects the instance ids the answers carry in
// their metadata.
//
// An engine uses it to see another engine serving its services that holds no lease it
// can see: an engine whose lease is in another JetStream domain (a leaf node's own),
// which would otherwise serve beside it, each writing data the other never reads.
package srvping

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// InstanceKey is the micro metadata key an engine's services carry its instance id in.
const InstanceKey = "instance_id"

// Answer is one service instance that answered.
type Answer struct {
	Service  string // the service asked
	Instance string // the engine's instance id; "" when the service carries none
	Version  string // the service's version
	ID       string // micro's id of the service instance
}

// Window bounds a ping: how long it waits for answers after the last one came (or
// after it asked, while none has), and in all.
type Window struct {
	Stall time.Duration
	Max   time.Duration
}

// DefaultWindow is what an engine waits at start: a broker says at once that nobody
// listens, and an answer from anywhere in the account comes within milliseconds.
var DefaultWindow = Window{Stall: 100 * time.Millisecond, Max: time.Second}

// Ping asks every service in services who answers, and returns the answers in the order
// they came. A service nobody answers adds nothing (the broker's no-responders status
// ends its wait at once).
func Ping(ctx context.Context, nc *nats.Conn, services []string, w Window) ([]Answer, error) {
	inbox := nc.NewInbox()
	msgs := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox+".*", msgs)
	if err != nil {
		return nil, fmt.Errorf("srvping: subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	open := make(map[string]string, len(services)) // reply subject → service
	for i, svc := range services {
		subject, err := micro.ControlSubject(micro.InfoVerb, svc, "")
		if err != nil {
			return nil, fmt.Errorf("srvping: %w", err)
		}
		reply := inbox + "." + strconv.Itoa(i)
		open[reply] = svc
		if err := nc.PublishRequest(subject, reply, nil); err != nil {
			return nil, fmt.Errorf("srvping: ask %s: %w", subject, err)
		}
	}
	all := time.NewTimer(w.Max)
	defer all.Stop()
	stall := time.NewTimer(w.Stall)
	defer stall.Stop()
	var out []Answer
	for len(open) > 0 {
		select {
		case m := <-msgs:
			svc, ok := open[m.Subject]
			if !ok {
				continue
			}
			if m.Header.Get("Status") == "503" { // no responders: nobody serves svc
				delete(open, m.Subject)
				continue
			}
			var p micro.Info
			if json.Unmarshal(m.Data, &p) == nil {
				out = append(out, Answer{Service: svc, Instance: p.Metadata[InstanceKey], Version: p.Version, ID: p.ID})
			}
			stall.Reset(w.Stall)
		case <-stall.C:
			return out, nil
		case <-all.C:
			return out, nil
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}
