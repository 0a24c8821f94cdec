package main

// The checks of abi-engine doctor, one function each, in the order they run.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/jsbucket"
	"github.com/abi-engine/engine/internal/jsdomain"
	"github.com/abi-engine/engine/lease/jetstreamstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// checkJetStream asks the account's JetStream for its limits: the one request every
// other check needs to succeed.
func (d *doctor) checkJetStream(parent context.Context) bool {
	configured := d.cfg.NATS.JetStream.Domain
	js, err := jsdomain.New(d.nc, configured)
	if err == nil {
		ctx, cancel := d.ctx(parent)
		defer cancel()
		var info *jetstream.AccountInfo
		if info, err = js.AccountInfo(ctx); err == nil {
			d.js, d.domain = js, info.Domain
			d.add(finding{Check: "jetstream", Verdict: verdictOK, Reason: fmt.Sprintf(
				"enabled for this account through %s, in %s: %d streams in use", d.nc.ConnectedServerName(), showDomain(info.Domain), info.Streams)})
			return true
		}
	}
	fix := "check the broker and the user's permissions for $JS.API.>"
	if configured != "" {
		fix = fmt.Sprintf("check nats.jetstream.domain (%s): no JetStream of that domain answers through this server (abi-engine doctor without it lists the account's domains), and the user's permissions for $JS.%s.API.>", configured, configured)
	}
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		fix = "enable JetStream on the server (jetstream { store_dir: ... } in its configuration)"
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		fix = "enable JetStream for this account (jetstream: enabled in the account's configuration)"
	}
	d.add(finding{Check: "jetstream", Verdict: verdictFail,
		Reason: fmt.Sprintf("JetStream does not answer on %s: %v; the lease lives in a JetStream bucket", d.nc.ConnectedServerName(), err), Fix: fix})
	return false
}

// minServer is the oldest nats-server whose KV answers carry the headers the epoch
// uses (docs/design.md §4.7); atomic batch publish, which the jetstream adapters' writes use,
// needs minAtomicServer.
var (
	minServer       = [2]int{2, 11}
	minAtomicServer = [2]int{2, 12}
)

func (d *doctor) checkVersion() {
	d.add(versionFinding(d.nc.ConnectedServerVersion(), d.jetstreamData()))
}

// versionFinding judges server version v; jetstreamData says whether a jetstream
// adapter is configured.
func versionFinding(v string, jetstreamData bool) finding {
	got, ok := majorMinor(v)
	switch {
	case !ok:
		return finding{Check: "server version", Verdict: verdictWarn,
			Reason: fmt.Sprintf("the server reports version %q, which is not major.minor.patch", v),
			Fix:    "run nats-server 2.12 or newer"}
	case less(got, minServer):
		return finding{Check: "server version", Verdict: verdictFail,
			Reason: fmt.Sprintf("nats-server %s is older than 2.11, whose headers the engine's epoch needs", v),
			Fix:    "upgrade nats-server to 2.12 or newer"}
	case less(got, minAtomicServer) && jetstreamData:
		return finding{Check: "server version", Verdict: verdictFail,
			Reason: fmt.Sprintf("nats-server %s has no atomic batch publish (2.12), which the jetstream adapters' writes use", v),
			Fix:    "upgrade nats-server to 2.12 or newer, or use the postgres adapter for keyvalue and no jetstream adapter"}
	}
	return finding{Check: "server version", Verdict: verdictOK, Reason: "nats-server " + v}
}

func (d *doctor) jetstreamData() bool {
	s := d.cfg.Services
	return s.KeyValue.Adapter == config.KeyValueJetStream || s.ObjectStorage.Adapter == config.ObjectStorageJetStream
}

func majorMinor(v string) ([2]int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return [2]int{major, minor}, err1 == nil && err2 == nil
}

func less(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

func (d *doctor) checkLeaseBucket(parent context.Context) {
	const check = "lease bucket"
	replicas := max(d.cfg.NATS.Engine.LeaseReplicas, 1)
	spec := jetstreamstore.BucketSpec(jetstreamstore.Config{Replicas: replicas})
	ctx, cancel := d.ctx(parent)
	defer cancel()
	_, found, err := jsbucket.Inspect(ctx, d.js, spec)
	var shape *jsbucket.ShapeError
	switch {
	case errors.As(err, &shape):
		d.add(finding{Check: check, Verdict: verdictFail,
			Reason: shape.Error() + ": an engine refuses it, since the key could vanish by itself and a second engine take a lease the first still holds",
			Fix:    "nats stream edit " + shape.Stream + " (history, max age and replicas can be edited; storage cannot: stop every engine and nats kv del " + shape.Bucket + ")"})
		return
	case err != nil:
		d.add(finding{Check: check, Verdict: verdictFail, Reason: err.Error(), Fix: "check the user's permissions for $JS.API.STREAM.INFO.>"})
		return
	}
	if f, bad := d.replicasAgainstCluster(check, "nats.engine.lease_replicas", replicas); bad {
		d.add(f)
		return
	}
	what := fmt.Sprintf("%s exists with history 1, file storage, no TTL, R%d", jetstreamstore.DefaultBucket, replicas)
	if !found {
		what = fmt.Sprintf("%s does not exist yet: the first engine creates it with history 1, file storage, no TTL, R%d", jetstreamstore.DefaultBucket, replicas)
	}
	d.add(finding{Check: check, Verdict: verdictOK, Reason: what})
}

// existingReplicas judges an existing bucket's stream cfg against the configured
// replicas (key): a bucket keeps the replicas it was made with, so a difference is a
// warning with its fix; then the configured number against the cluster's size.
func (d *doctor) existingReplicas(check, key string, cfg jetstream.StreamConfig, replicas int) (finding, bool) {
	if has := max(cfg.Replicas, 1); has != replicas {
		return finding{Check: check, Verdict: verdictWarn,
			Reason: fmt.Sprintf("stream %s has R%d, %s asks for %d: an existing bucket keeps the replicas it has", cfg.Name, has, key, replicas),
			Fix:    fmt.Sprintf("nats stream edit %s --replicas %d", cfg.Name, replicas)}, true
	}
	return d.replicasAgainstCluster(check, key, replicas)
}

// replicasAgainstCluster judges configured replicas against the cluster's size: more
// than it has servers cannot be created; one on a cluster loses the bucket with its node.
func (d *doctor) replicasAgainstCluster(check, key string, replicas int) (finding, bool) {
	switch {
	case replicas > d.nodes:
		return finding{Check: check, Verdict: verdictFail,
			Reason: fmt.Sprintf("%s is %d, but %s has %d JetStream server(s): the bucket cannot be placed", key, replicas, showDomain(d.domain), d.nodes),
			Fix:    fmt.Sprintf("set %s to at most %d", key, d.nodes)}, true
	case replicas == 1 && d.nodes > 1:
		return finding{Check: check, Verdict: verdictWarn,
			Reason: fmt.Sprintf("%s is 1 on a cluster of %d servers: the bucket lives on one node and cannot be read or written while that node is down", key, d.nodes),
			Fix:    fmt.Sprintf("set %s: 3 (an existing bucket: nats stream edit --replicas 3)", key)}, true
	}
	return finding{}, false
}

// checkDataBuckets checks the buckets of the jetstream adapters: file storage and no
// TTL (else data vanishes by itself), and replicas as configured (an existing bucket
// keeps its own: a WARN).
func (d *doctor) checkDataBuckets(parent context.Context) {
	s := d.cfg.Services
	if s.KeyValue.Adapter == config.KeyValueJetStream {
		d.checkDataBucket(parent, jsbucket.Spec{What: "keyvalue bucket",
			KeyValue: &jetstream.KeyValueConfig{Bucket: s.KeyValue.Bucket}}, "services.keyvalue.replicas", d.cfg.KeyValueReplicas())
	}
	if s.ObjectStorage.Adapter == config.ObjectStorageJetStream {
		d.checkDataBucket(parent, jsbucket.Spec{What: "object_storage bucket",
			Object: &jetstream.ObjectStoreConfig{Bucket: s.ObjectStorage.Bucket}}, "services.object_storage.replicas", d.cfg.ObjectStorageReplicas())
	}
}

func (d *doctor) checkDataBucket(parent context.Context, spec jsbucket.Spec, key string, replicas int) {
	check := spec.What
	spec.Require = []jsbucket.Setting{jsbucket.FileStorage(), jsbucket.NoMaxAge()}
	ctx, cancel := d.ctx(parent)
	defer cancel()
	cfg, found, err := jsbucket.Inspect(ctx, d.js, spec)
	var shape *jsbucket.ShapeError
	switch {
	case errors.As(err, &shape):
		d.add(finding{Check: check, Verdict: verdictFail,
			Reason: shape.Error() + ": its data can vanish by itself (a server restart, an age limit)",
			Fix:    "nats stream edit " + shape.Stream + " --max-age 0 for a TTL; storage cannot be edited: copy the data to a file-storage bucket"})
		return
	case err != nil:
		d.add(finding{Check: check, Verdict: verdictFail, Reason: err.Error(), Fix: "check the user's permissions for $JS.API.STREAM.INFO.>"})
		return
	}
	if !found {
		if f, bad := d.replicasAgainstCluster(check, key, replicas); bad {
			d.add(f)
			return
		}
		d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf("does not exist yet: the first engine creates it with file storage, no TTL, R%d", replicas)})
		return
	}
	if f, bad := d.existingReplicas(check, key, cfg, replicas); bad {
		d.add(f)
		return
	}
	d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf("stream %s: file storage, no TTL, R%d", cfg.Name, replicas)})
}

// serverSettings are what the checks read of the server's varz.
type serverSettings struct {
	From         string // where they were read
	PingInterval time.Duration
	PingMax      int
	SyncInterval time.Duration // 0: the server's default
	SyncAlways   bool
}

// varz is the part of nats-server's varz the checks read (durations in nanoseconds).
type varz struct {
	PingInterval time.Duration `json:"ping_interval"`
	PingMax      int           `json:"ping_max"`
	JetStream    struct {
		Config *struct {
			SyncInterval time.Duration `json:"sync_interval"`
			SyncAlways   bool          `json:"sync_always"`
		} `json:"config"`
	} `json:"jetstream"`
}

// readServer reads the server's varz from --monitor: the server's HTTP monitoring
// address, or the URL of a system-account user (nats://sys:...@host:4222), which may
// ask any server of the cluster for it. The engine's own user may not: varz is the
// system account's, and that account has no JetStream.
func (d *doctor) readServer(parent context.Context) (*serverSettings, error) {
	if d.monitor == "" {
		return nil, errors.New("the server's varz belongs to the system account and its monitoring port; give one with --monitor (http://nats:8222, or nats://USER:PASSWORD@nats:4222 for a system-account user)")
	}
	ctx, cancel := d.ctx(parent)
	defer cancel()
	var v varz
	from := d.monitor
	if strings.HasPrefix(d.monitor, "http://") || strings.HasPrefix(d.monitor, "https://") {
		from = strings.TrimRight(d.monitor, "/") + "/varz"
		if err := getJSON(ctx, from, &v); err != nil {
			return nil, fmt.Errorf("GET %s: %w", from, err)
		}
	} else if err := d.systemVarz(ctx, &v); err != nil {
		return nil, err
	}
	s := &serverSettings{From: from, PingInterval: v.PingInterval, PingMax: v.PingMax}
	if c := v.JetStream.Config; c != nil {
		s.SyncInterval, s.SyncAlways = c.SyncInterval, c.SyncAlways
	}
	return s, nil
}

// systemVarz asks, as the system-account user of --monitor, the server the engine's
// connection is on for its varz.
func (d *doctor) systemVarz(ctx context.Context, v *varz) error {
	sys, err := connect(brokerSettings{URL: d.monitor, Timeout: d.timeout}, "abi-engine doctor (system)")
	if err != nil {
		return err
	}
	defer sys.Close()
	subject := "$SYS.REQ.SERVER." + d.nc.ConnectedServerId() + ".VARZ"
	m, err := sys.RequestWithContext(ctx, subject, []byte("{}"))
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer to %s: the user of --monitor is not in the system account", subject)
	}
	if err != nil {
		return fmt.Errorf("request %s: %w", subject, err)
	}
	var r struct {
		Data  *varz `json:"data"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("the answer to %s is not varz: %w", subject, err)
	}
	if r.Error != nil || r.Data == nil {
		return fmt.Errorf("the server refused %s: %+v", subject, r.Error)
	}
	*v = *r.Data
	return nil
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// checkPingInterval compares how long the broker keeps a half-open connection (its
// subscriptions included) with the lease: the successor serves one lease after the
// holder went silent, and until the broker drops the old connection it hands about
// half the calls to it, which time out (docs/chaos.md, partition).
func (d *doctor) checkPingInterval() {
	const check = "ping interval"
	lease := d.cfg.NATS.Engine.Lease()
	if d.server == nil {
		fix := fmt.Sprintf("check by hand that ping_interval x (ping_max + 1) is at most the lease (%s); nats-server's default 2m x 3 is not", lease)
		if d.embedded {
			pingMax := cmp.Or(d.cfg.NATS.Embedded.PingMax, 2) // 0: nats-server's 2
			fix = fmt.Sprintf("set %s (e.g. \"127.0.0.1:8222\") for doctor to read it, and %s: %s in the engine's configuration (lease %s / (ping_max %d + 1))",
				keyEmbeddedHTTP, keyEmbeddedPing, secondsValue(lease/time.Duration(pingMax+1)), lease, pingMax)
		}
		d.add(finding{Check: check, Verdict: verdictWarn,
			Reason: "cannot read the server's ping_interval: " + d.serverErr.Error(), Fix: fix})
		return
	}
	s := d.server
	stale := s.PingInterval * time.Duration(s.PingMax+1)
	if stale <= lease {
		d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf(
			"ping_interval %s, ping_max %d: a half-open connection is dropped within %s, no later than a successor serves (lease %s)", s.PingInterval, s.PingMax, stale, lease)})
		return
	}
	want := max((lease / time.Duration(s.PingMax+1)).Truncate(time.Second), time.Second)
	fix := fmt.Sprintf("set ping_interval: \"%s\" in the server's configuration (lease %s / (ping_max %d + 1))", want, lease, s.PingMax)
	if d.embedded {
		fix = fmt.Sprintf("set %s: %s in the engine's configuration, the embedded broker's (lease %s / (ping_max %d + 1))", keyEmbeddedPing, secondsValue(want), lease, s.PingMax)
	}
	d.add(finding{Check: check, Verdict: verdictWarn,
		Reason: fmt.Sprintf("ping_interval %s, ping_max %d: the broker keeps a half-open holder's subscriptions for up to %s, "+
			"%s past the lease, and hands it about half the calls after its successor serves; they time out (docs/chaos.md, partition)", s.PingInterval, s.PingMax, stale, stale-lease),
		Fix: fix})
}

// The keys of the embedded broker's settings, which the fixes name on an engine's
// embedded broker: a server configuration file it does not have.
const (
	keyEmbeddedPing       = "nats.embedded.ping_interval_seconds"
	keyEmbeddedSyncAlways = "nats.embedded.sync_always"
	keyEmbeddedHTTP       = "nats.embedded.http_listen"
)

// secondsValue is d as the value of a _seconds key: whole seconds, at least 1.
func secondsValue(d time.Duration) string {
	return strconv.FormatInt(int64(max(d.Truncate(time.Second), time.Second)/time.Second), 10)
}

// defaultSyncInterval is nats-server's sync_interval when none is configured.
const defaultSyncInterval = 2 * time.Minute

// checkSync judges lazy fsync: an acknowledged write on one replica sits in the page
// cache for up to sync_interval, so a host crash (not a process crash) can take back
// the last lease revisions and data writes. A replicated bucket has the write on a
// quorum before it is acknowledged.
func (d *doctor) checkSync() {
	const check = "fsync"
	replicas := d.cfg.NATS.Engine.LeaseReplicas
	if d.server == nil {
		v := verdictWarn
		reason := "cannot read the server's sync_interval: " + d.serverErr.Error()
		if replicas >= 3 {
			v, reason = verdictOK, "the lease bucket is R3 or more: an acknowledged write is on a quorum of servers"
		}
		fix := "with R1 buckets, set sync_interval: always in the server's jetstream block, or use R3 on a cluster"
		if d.embedded {
			fix = fmt.Sprintf("set %s: true in the engine's configuration, and %s for doctor to read it", keyEmbeddedSyncAlways, keyEmbeddedHTTP)
		}
		d.add(finding{Check: check, Verdict: v, Reason: reason, Fix: fix})
		return
	}
	s := d.server
	interval := s.SyncInterval
	if interval == 0 {
		interval = defaultSyncInterval
	}
	switch {
	case s.SyncAlways:
		d.add(finding{Check: check, Verdict: verdictOK, Reason: "sync_interval always: every write is on disk before it is acknowledged"})
	case replicas >= 3:
		d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf(
			"sync_interval %s, but the lease bucket is R%d: an acknowledged write is on a quorum of servers", interval, replicas)})
	default:
		fix := "set sync_interval: always in the server's jetstream block, or run a 3-node cluster with lease_replicas: 3"
		if d.embedded {
			// One node: replicas are not an option.
			fix = fmt.Sprintf("set %s: true in the engine's configuration, the embedded broker's", keyEmbeddedSyncAlways)
		}
		d.add(finding{Check: check, Verdict: verdictWarn,
			Reason: fmt.Sprintf("sync_interval %s with an R%d lease bucket: a crash of the server's host can lose the last %s of acknowledged writes, "+
				"lease renewals and data included, and the lease revision can go back", interval, max(replicas, 1), interval),
			Fix: fix})
	}
}

// rttSamples is how many round trips checkRTT measures; it judges the slowest.
const rttSamples = 5

// checkRTT compares the connection's round trip with lease/4, the bound on one
// renewal: a renewal is a JetStream request, one round trip plus the store's write.
func (d *doctor) checkRTT() {
	const check = "round trip"
	var worst time.Duration
	for range rttSamples {
		rtt, err := d.nc.RTT()
		if err != nil {
			d.add(finding{Check: check, Verdict: verdictFail, Reason: "cannot measure the round trip: " + err.Error(), Fix: "check the broker"})
			return
		}
		worst = max(worst, rtt)
	}
	d.add(rttFinding(worst, d.cfg.NATS.Engine.Lease()))
}

// rttFinding judges the slowest round trip measured against the lease.
func rttFinding(worst, lease time.Duration) finding {
	const check = "round trip"
	bound := lease / 4
	switch {
	case worst >= bound:
		return finding{Check: check, Verdict: verdictFail,
			Reason: fmt.Sprintf("a round trip took %s, at least lease/4 (%s): renewals time out and the engine fences", worst, bound),
			Fix:    "run the engine near the broker, or raise nats.engine.lease_seconds"}
	case worst >= bound/5:
		return finding{Check: check, Verdict: verdictWarn,
			Reason: fmt.Sprintf("a round trip took %s, over a fifth of lease/4 (%s): a slow write or a leader election can make a renewal time out", worst, bound),
			Fix:    "run the engine near the broker, or raise nats.engine.lease_seconds"}
	}
	return finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf("slowest of %d round trips %s, under a fifth of lease/4 (%s)", rttSamples, worst, bound)}
}

// drainMargin is what a handover needs besides the drain: job runs to finish, the
// release, closing the connections.
const drainMargin = 10 * time.Second

// checkDrain compares drain_seconds with the pod's grace period: the kubelet kills a
// process still draining when the grace period ends, and the calls it was answering
// time out.
func (d *doctor) checkDrain() {
	if d.grace == 0 {
		return
	}
	const check = "drain"
	drain := d.cfg.NATS.Engine.Drain()
	switch {
	case d.grace <= drain:
		d.add(finding{Check: check, Verdict: verdictFail,
			Reason: fmt.Sprintf("terminationGracePeriodSeconds %s is not above drain_seconds %s: the kubelet kills the old engine in its drain, and the calls it answers time out", d.grace, drain),
			Fix:    fmt.Sprintf("set terminationGracePeriodSeconds to at least %s (drain plus the time jobs need), or lower nats.engine.drain_seconds", drain+drainMargin)})
	case d.grace < drain+drainMargin:
		d.add(finding{Check: check, Verdict: verdictWarn,
			Reason: fmt.Sprintf("terminationGracePeriodSeconds %s leaves %s after drain_seconds %s for job runs to finish and the engine to close", d.grace, d.grace-drain, drain),
			Fix:    fmt.Sprintf("set terminationGracePeriodSeconds to at least %s plus the time jobs need", drain+drainMargin)})
	default:
		d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf(
			"terminationGracePeriodSeconds %s leaves %s after drain_seconds %s", d.grace, d.grace-drain, drain)})
	}
}
