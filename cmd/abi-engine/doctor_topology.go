package main

// The checks of how the account's servers are laid out: which servers a replicated
// bucket can be placed on, and whether every engine of the account meets on one lease
// (JetStream domains, on leaf nodes with JetStream of their own).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/internal/srvping"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go/jetstream"
)

// serverInfo is what an account's STATZ answer says of the server that sent it.
type serverInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	Domain    string `json:"domain"`
	JetStream bool   `json:"jetstream"`
}

// readServers asks every server that carries the account (its cluster, a hub and its
// leaf nodes) for its STATZ, which any user may ask when unused accounts are included.
// None answering (a server too old, a permission) leaves the list empty.
func (d *doctor) readServers(parent context.Context) []serverInfo {
	window := min(d.timeout, time.Second)
	inbox := d.nc.NewRespInbox()
	sub, err := d.nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection closes right after
	if err := d.nc.PublishRequest("$SYS.REQ.ACCOUNT.PING.STATZ", inbox, []byte(`{"include_unused":true}`)); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(parent, window)
	defer cancel()
	seen := map[string]bool{}
	var out []serverInfo
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break
		}
		var r struct {
			Server serverInfo `json:"server"`
		}
		if json.Unmarshal(m.Data, &r) == nil && r.Server.ID != "" && !seen[r.Server.ID] {
			seen[r.Server.ID] = true
			out = append(out, r.Server)
		}
	}
	return out
}

// leaseNodes counts the servers a bucket of the lease's domain can be placed on: those
// with JetStream in that domain; with no domain anywhere, those of the cluster the
// connection is on. A leaf node and its hub are not one cluster, whatever the account's
// STATZ answers list. A list with none of them counts as one server.
func (d *doctor) leaseNodes() int {
	n := 0
	for _, s := range d.servers {
		switch {
		case !s.JetStream:
		case d.domain != "" && s.Domain == d.domain:
			n++
		case d.domain == "" && s.Domain == "" && s.Cluster != "" && s.Cluster == d.nc.ConnectedClusterName():
			n++
		}
	}
	return max(n, 1)
}

// domains are the JetStream domains the account's servers announce, sorted; "" is
// JetStream with no domain.
func (d *doctor) domains() []string {
	var out []string
	for _, s := range d.servers {
		if s.JetStream && !slices.Contains(out, s.Domain) {
			out = append(out, s.Domain)
		}
	}
	slices.Sort(out)
	return out
}

// showDomain names a JetStream domain in a message.
func showDomain(d string) string {
	if d == "" {
		return "the JetStream with no domain"
	}
	return "domain " + d
}

// checkDomain judges where engines keep the lease: every engine of the account must
// meet on one lease bucket. It fails when another engine serves the kernel services
// without a lease the configured domain shows (a split), when another domain holds a
// lease bucket of its own or the streams of the configured buckets (left by a split),
// and when no domain is configured while the account sees JetStream in several (each
// engine would use its own server's).
func (d *doctor) checkDomain(ctx context.Context) {
	const check = "jetstream domain"
	doms := d.domains()
	shown := make([]string, len(doms))
	for i, x := range doms {
		shown[i] = x
		if x == "" {
			shown[i] = `""`
		}
	}
	configured := d.cfg.NATS.JetStream.Domain
	if f, split := d.splitEngines(ctx, check); split {
		d.add(f)
		return
	}
	for _, other := range doms {
		if other == "" || other == d.domain {
			continue
		}
		if holder, ok := d.leaseIn(ctx, other); ok {
			d.add(finding{Check: check, Verdict: verdictFail,
				Reason: fmt.Sprintf("JetStream %s holds a lease bucket %s too (holder: %s), beside the one of %s: engines there take a lease of their own, and both serve",
					showDomain(other), jetstreamstore.DefaultBucket, orNone(holder), showDomain(d.domain)),
				Fix: fmt.Sprintf("set nats.jetstream.domain: %s on every engine of the account; once none runs in %s, delete its bucket (nats kv del %s --js-domain %s)",
					orFirst(configured, d.domain), other, jetstreamstore.DefaultBucket, other)})
			return
		}
		if streams := d.dataStreamsIn(ctx, other); len(streams) > 0 {
			d.add(finding{Check: check, Verdict: verdictFail,
				Reason: fmt.Sprintf("JetStream %s holds %s, the stream(s) of this configuration's buckets, beside those of %s: data an engine wrote there (with no domain, or another) is not what the engines read, and an object write from a server of that domain reaches both",
					showDomain(other), strings.Join(streams, " and "), showDomain(d.domain)),
				Fix: fmt.Sprintf("copy what is needed into %s, then delete them (nats stream rm STREAM --js-domain %s)", showDomain(d.domain), other)})
			return
		}
	}
	switch {
	case configured == "" && len(doms) > 1:
		d.add(finding{Check: check, Verdict: verdictFail,
			Reason: fmt.Sprintf("no nats.jetstream.domain, and the account has JetStream in %d domains (%s): an engine keeps its lease in the JetStream of the server it is connected to (here %s), so engines on different leaf nodes take different leases and both serve",
				len(doms), strings.Join(shown, ", "), showDomain(d.domain)),
			Fix: "set nats.jetstream.domain to one of them (the hub's, or the leaf node whose JetStream holds the data) on every engine of the account"})
	case configured != "" && len(doms) > 1:
		d.add(finding{Check: check, Verdict: verdictWarn,
			Reason: fmt.Sprintf("the lease and the data are in domain %s; the account has JetStream in %s too: an engine that does not set nats.jetstream.domain: %s takes a lease of its own there",
				configured, strings.Join(slices.DeleteFunc(shown, func(s string) bool { return s == configured }), ", "), configured),
			Fix: fmt.Sprintf("set nats.jetstream.domain: %s on every engine of the account", configured)})
	case len(doms) == 0:
		d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf(
			"the lease and the data are in %s; the servers' statistics do not list the account's other JetStream domains, if any", showDomain(d.domain))})
	default:
		d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf(
			"the lease and the data are in %s, the account's only JetStream", showDomain(d.domain))})
	}
}

func orFirst(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// splitEngines asks who serves the kernel services and fails on an engine the lease of
// the configured domain does not name (nor its epoch record): it keeps its lease
// elsewhere.
func (d *doctor) splitEngines(ctx context.Context, check string) (finding, bool) {
	answers, err := srvping.Ping(ctx, d.nc, []string{"keyvalue", "object_storage"}, srvping.DefaultWindow)
	if err != nil || len(answers) == 0 {
		return finding{}, false
	}
	holder, _ := d.leaseIn(ctx, d.domain)
	known := map[string]bool{holder: true}
	if ep, ok := d.epochIn(ctx, d.domain); ok {
		known[ep] = true
	}
	for _, a := range answers {
		if a.Instance == "" || known[a.Instance] {
			continue
		}
		return finding{Check: check, Verdict: verdictFail,
			Reason: fmt.Sprintf("engine %s serves %s on this account, but the lease in %s names %s: it keeps its lease in another JetStream domain, and both serve",
				a.Instance, a.Service, showDomain(d.domain), orNone(holder)),
			Fix: "set nats.jetstream.domain to the same domain on every engine of the account, and restart the engines that did not have it"}, true
	}
	return finding{}, false
}

// dataStreamsIn lists the streams of the jetstream adapters' buckets that exist in
// domain.
func (d *doctor) dataStreamsIn(ctx context.Context, domain string) []string {
	var names []string
	s := d.cfg.Services
	if s.KeyValue.Adapter == config.KeyValueJetStream {
		names = append(names, "KV_"+s.KeyValue.Bucket)
	}
	if s.ObjectStorage.Adapter == config.ObjectStorageJetStream {
		names = append(names, "OBJ_"+s.ObjectStorage.Bucket)
	}
	js, err := jsdomain.New(d.nc, domain)
	if err != nil {
		return nil
	}
	var found []string
	for _, n := range names {
		c, cancel := d.ctx(ctx)
		_, err := js.Stream(c, n)
		cancel()
		if err == nil {
			found = append(found, n)
		}
	}
	return found
}

// leaseIn reads the lease bucket of domain: the holder's instance id ("" when free) and
// whether the bucket exists. "" is the domain of the connection's server.
func (d *doctor) leaseIn(ctx context.Context, domain string) (string, bool) {
	kv, ok := d.leaseBucket(ctx, domain)
	if !ok {
		return "", false
	}
	c, cancel := d.ctx(ctx)
	defer cancel()
	e, err := kv.Get(c, jetstreamstore.Key)
	if err != nil {
		return "", true
	}
	return lease.DecodeHolder(e.Value()).InstanceID, true
}

// epochIn is the instance the epoch record of domain names.
func (d *doctor) epochIn(ctx context.Context, domain string) (string, bool) {
	kv, ok := d.leaseBucket(ctx, domain)
	if !ok {
		return "", false
	}
	c, cancel := d.ctx(ctx)
	defer cancel()
	e, err := kv.Get(c, jetstreamstore.EpochKey)
	if err != nil {
		return "", false
	}
	r, err := lease.DecodeEpoch(e.Value())
	return r.InstanceID, err == nil
}

func (d *doctor) leaseBucket(ctx context.Context, domain string) (jetstream.KeyValue, bool) {
	js := d.js
	if domain != d.domain {
		var err error
		if js, err = jsdomain.New(d.nc, domain); err != nil {
			return nil, false
		}
	}
	c, cancel := d.ctx(ctx)
	defer cancel()
	kv, err := js.KeyValue(c, jetstreamstore.DefaultBucket)
	return kv, err == nil
}
