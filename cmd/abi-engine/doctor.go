package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/redact"
	"github.com/abi-engine/engine/supervisor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// verdict is how a doctor check came out.
type verdict int

const (
	verdictOK verdict = iota
	verdictWarn
	verdictFail
)

func (v verdict) String() string {
	switch v {
	case verdictOK:
		return "OK"
	case verdictWarn:
		return "WARN"
	default:
		return "FAIL"
	}
}

// finding is the outcome of one check: what was found and, unless it is OK, what to do.
type finding struct {
	Check   string
	Verdict verdict
	Reason  string
	Fix     string
}

type doctorFlags struct {
	conn    connFlags
	monitor string
	grace   time.Duration
	asJSON  bool
}

func (c *cli) doctorCommand() *cobra.Command {
	var f doctorFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check, before a deploy, that the broker setup keeps the lease safe",
		Long: `doctor connects to the broker the configuration names and checks what breaks lease
systems on NATS, each as OK, WARN or FAIL with the reason and the fix: JetStream is
enabled and reachable (in nats.jetstream.domain, when set); that every engine of
the account meets on one lease (JetStream domains on leaf nodes: no engine serves
without a lease the domain shows, no other domain holds a lease bucket, and several
domains need nats.jetstream.domain); the server version (2.11 or newer for the epoch headers); the
lease bucket ABI_ENGINE (history 1, file storage, no TTL, replicas against the cluster
size); the jetstream adapters' data buckets; with nats.discovery, the module registry's
bucket ABI_DISCOVERY_<project> (file storage, no TTL, history 1, the replicas of
nats.engine.lease_replicas); the server's ping_interval against the
lease (a half-open holder keeps its subscriptions until the broker's ping drops it);
lazy fsync (sync_interval); the connection's round trip against lease/4; and, with
--termination-grace, drain_seconds against the pod's terminationGracePeriodSeconds.

The server's ping_interval and sync_interval are in its varz, which belongs to the
system account: --monitor names where to read it, the server's HTTP monitoring address
(http://nats:8222) or a system-account user (nats://sys:PASSWORD@nats:4222); with
nats.url empty, the default is the embedded broker's nats.embedded.http_listen. Without
it, or when it cannot be read, those checks are a WARN saying so. On an engine's
embedded broker the fixes name the keys of nats.embedded that set them.

doctor reads and never creates or changes anything. Exit 0 when nothing fails, 1 when
a check fails, 2 for a configuration error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.runDoctor(cmd, f)
		},
	}
	fl := cmd.Flags()
	f.conn.add(cmd)
	fl.BoolVar(&f.asJSON, "json", false, "print the findings as one JSON object")
	fl.StringVar(&f.monitor, "monitor", "", "where to read the server's varz: its HTTP monitoring address (http://nats:8222) or a system-account user's URL (nats://sys:PASSWORD@nats:4222)")
	fl.DurationVar(&f.grace, "termination-grace", 0, "the pod's terminationGracePeriodSeconds, e.g. 120s, to check drain_seconds against")
	return cmd
}

func (c *cli) runDoctor(cmd *cobra.Command, f doctorFlags) error {
	if cmd.Flags().Changed("termination-grace") && f.grace <= 0 {
		return usageError(&flagError{fmt.Errorf("--termination-grace %s: must be positive", f.grace)})
	}
	// The configuration is read as the engine's own (its role included): doctor
	// judges the buckets and timings of the engine it is about to deploy.
	conn, err := c.resolve(cmd, &f.conn, false)
	if err != nil {
		return err
	}
	cfg, b := conn.cfg, conn.broker
	monitor := f.monitor
	if monitor == "" && cfg.NATS.EmbeddedBroker() {
		// The engine's own broker serves its varz where the configuration says.
		monitor = cfg.NATS.EmbeddedMonitorURL()
	}
	d := &doctor{cfg: cfg, monitor: monitor, grace: f.grace, timeout: b.Timeout}
	if !f.asJSON {
		fmt.Fprintf(c.stdout, "abi-engine doctor: %s (lease %s, drain %s)\n",
			redact.String(b.URL), cfg.NATS.Engine.Lease(), cfg.NATS.Engine.Drain())
	}

	nc, err := connect(b, "abi-engine doctor")
	if err != nil {
		d.add(finding{Check: "broker", Verdict: verdictFail, Reason: err.Error(),
			Fix: "start the broker, or name it with --nats or nats.url"})
	} else {
		defer nc.Close()
		d.nc = nc
		d.run(cmd.Context())
	}
	failed := false
	if f.asJSON {
		rep := d.json(redact.String(b.URL))
		if err := writeJSON(c.stdout, rep); err != nil {
			return err
		}
		failed = rep.Fail > 0
	} else {
		failed = d.report(c.stdout)
	}
	if failed {
		return &exitError{Code: exitRuntime}
	}
	return nil
}

// doctor runs the checks against one broker.
type doctor struct {
	cfg     *config.Config
	nc      *nats.Conn
	js      jetstream.JetStream
	monitor string
	grace   time.Duration
	timeout time.Duration

	found []finding
	// domain is the JetStream domain the lease and the data are in ("": none), as the
	// JetStream the checks use reports it.
	domain string
	// servers are the account's servers, as their STATZ answers describe them.
	servers []serverInfo
	// nodes is how many JetStream servers the lease's domain has: what the checks of
	// the buckets judge replicas by.
	nodes int
	// server is the server's varz, when it could be read; serverErr says why not.
	server    *serverSettings
	serverErr error
	// embedded says the broker is an engine's embedded one: its settings are keys of
	// nats.embedded in the engine's configuration, and the fixes name them.
	embedded bool
}

func (d *doctor) add(f finding) { d.found = append(d.found, f) }

// run runs every check; a broker without JetStream ends them after the first.
func (d *doctor) run(ctx context.Context) {
	if !d.checkJetStream(ctx) {
		return
	}
	d.checkVersion()
	d.embedded = d.nc.ConnectedServerName() == supervisor.EmbeddedServerName
	d.servers = d.readServers(ctx)
	d.nodes = d.leaseNodes()
	d.checkDomain(ctx)
	d.checkLeaseBucket(ctx)
	d.checkDataBuckets(ctx)
	d.checkDiscoveryBucket(ctx)
	d.server, d.serverErr = d.readServer(ctx)
	d.checkPingInterval()
	d.checkSync()
	d.checkRTT()
	d.checkDrain()
}

// report prints every finding and a summary, and reports whether any failed.
func (d *doctor) report(w io.Writer) (failed bool) {
	var count [3]int
	for _, f := range d.found {
		count[f.Verdict]++
		fmt.Fprintf(w, "%-5s %-21s %s\n", f.Verdict, f.Check, redact.String(f.Reason))
		if f.Verdict != verdictOK && f.Fix != "" {
			fmt.Fprintf(w, "      %-21s fix: %s\n", "", f.Fix)
		}
	}
	fmt.Fprintf(w, "%d OK, %d WARN, %d FAIL\n", count[verdictOK], count[verdictWarn], count[verdictFail])
	return count[verdictFail] > 0
}

// doctorJSON is the output of doctor --json: the broker, the lease timings it judged
// against, every finding and the counts.
type doctorJSON struct {
	NATSURL      string        `json:"nats_url"`
	LeaseSeconds float64       `json:"lease_seconds"`
	DrainSeconds float64       `json:"drain_seconds"`
	Findings     []findingJSON `json:"findings"`
	OK           int           `json:"ok"`
	Warn         int           `json:"warn"`
	Fail         int           `json:"fail"`
}

// findingJSON is one finding; fix is empty for an OK.
type findingJSON struct {
	Check   string `json:"check"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Fix     string `json:"fix,omitempty"`
}

func (d *doctor) json(url string) doctorJSON {
	out := doctorJSON{NATSURL: url, LeaseSeconds: d.cfg.NATS.Engine.Lease().Seconds(),
		DrainSeconds: d.cfg.NATS.Engine.Drain().Seconds(), Findings: []findingJSON{}}
	for _, f := range d.found {
		fj := findingJSON{Check: f.Check, Verdict: f.Verdict.String(), Reason: redact.String(f.Reason)}
		if f.Verdict != verdictOK {
			fj.Fix = redact.String(f.Fix)
		}
		out.Findings = append(out.Findings, fj)
		switch f.Verdict {
		case verdictOK:
			out.OK++
		case verdictWarn:
			out.Warn++
		default:
			out.Fail++
		}
	}
	return out
}

func (d *doctor) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, d.timeout)
}
