package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/redact"
	"github.com/spf13/cobra"
)

func (c *cli) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check the configuration",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(fmt.Errorf("unknown command %q for \"abi-engine config\" (the one command is check)", args[0]))
			}
			return usageError(errors.New("abi-engine config needs a command: check"))
		},
	}
	cmd.AddCommand(c.configCheckCommand())
	return cmd
}

func (c *cli) configCheckCommand() *cobra.Command {
	var path, rollout string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and the shared-backend check for a rollout",
		Long: `check reads the configuration as abi-engine run does (--config, else abi-engine.yaml in
the working directory, else the defaults; then ABI_ENGINE_ROLE, ABI_ROLLOUT_ID and
ABI_NATS_URL) and prints every problem, with the shared-backend verdict for the rollout
(--rollout, else ABI_ROLLOUT_ID, else nats.engine.rollout_id): a serving engine with a
rollout id hands over without downtime, so none of its services may keep its data on this
host. It also reads the files the configuration names, as an engine would at connect:
a .creds file must hold a user JWT and that user's nkey seed, a client certificate must
match its key, and both the JWT and the certificate must be valid now (an expired one is
named with its dates). It exits 2 on any problem and 0 otherwise, printing where each
service keeps its data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var overrides []config.Override
			if cmd.Flags().Changed("rollout") {
				// The rollout of a deploy comes from ABI_ROLLOUT_ID; the flag stands in for it.
				overrides = append(overrides, config.RolloutFlag(rollout))
			}
			cfg, err := config.Check(path, c.env, overrides...)
			if err != nil {
				c.printConfigErrors(err)
				return &exitError{Code: exitUsage}
			}
			printConfigSummary(c.stdout, cfg)
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "configuration file (default: abi-engine.yaml in the working directory, if any)")
	cmd.Flags().StringVar(&rollout, "rollout", "", "check as a deploy with this rollout id, as ABI_ROLLOUT_ID would set it")
	return cmd
}

// printConfigErrors prints every problem, then the shared-backend verdict.
func (c *cli) printConfigErrors(err error) {
	w := c.stderr
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		fmt.Fprintf(w, "abi-engine: %s\n", redact.String(err.Error()))
		return
	}
	fmt.Fprintln(w, cerr.Error())
	var local *config.LocalBackendsError
	if errors.As(err, &local) {
		fmt.Fprintf(w, "shared backends: refused for rollout %s: a rollout hands over without downtime, "+
			"but these services keep their data on this host:\n", local.RolloutID)
		for _, l := range local.Local {
			fmt.Fprintf(w, "  %s: %s\n", l.Service, l.Where)
		}
		return
	}
	fmt.Fprintln(w, "shared backends: not refused by what could be checked; check again once the problems above are fixed")
}

// printConfigSummary says what a valid configuration does: role, rollout, where each
// service keeps its data, and whether a deploy can hand over without downtime.
func printConfigSummary(w io.Writer, cfg *config.Config) {
	from := "the defaults (no " + config.FileName + " in the working directory)"
	if cfg.Path() != "" {
		from = cfg.Path()
	}
	e := cfg.NATS.Engine
	local := map[string]string{}
	var localNames []string
	for _, l := range cfg.LocalBackends() {
		local[l.Service] = l.Where
		localNames = append(localNames, l.Service)
	}
	fmt.Fprintf(w, "ok: %s\n", from)
	row := func(k, v string) { fmt.Fprintf(w, "  %-15s %s\n", k+":", v) }
	row("role", string(e.Role))
	row("rollout", orNone(e.RolloutID))
	row("nats", whereNATS(cfg.NATS))
	if e.Role != config.RoleClient {
		row("jetstream", whereJetStream(cfg.NATS.JetStream))
	}
	if e.Role == config.RoleClient {
		row("keyvalue", "a NATS client of the serving engine (a client opens no backend)")
		row("object_storage", "a NATS client of the serving engine (a client opens no backend)")
	} else {
		row("keyvalue", whereKeyValue(cfg, local["keyvalue"]))
		row("object_storage", whereObjects(cfg, local["object_storage"]))
	}
	if cfg.HTTP.Listen == "" {
		row("http", "off")
	} else {
		row("http", cfg.HTTP.Listen+" (/healthz, /readyz, /status, /metrics)")
	}
	fmt.Fprintf(w, "shared backends: %s\n", sharedVerdict(e, localNames))
}

// whereJetStream says which JetStream holds the lease and the jetstream adapters' buckets.
func whereJetStream(j config.JetStream) string {
	if j.Domain == "" {
		return "the JetStream of the server the engine is connected to (no nats.jetstream.domain: on leaf nodes with JetStream of their own, set one)"
	}
	return "domain " + j.Domain + ": the lease bucket ABI_ENGINE and the jetstream buckets, wherever the engine is connected"
}

func whereKeyValue(cfg *config.Config, local string) string {
	kv := cfg.Services.KeyValue
	switch {
	case local != "":
		return fmt.Sprintf("%s: %s (this host)", kv.Adapter, local)
	case kv.Adapter == config.KeyValueJetStream:
		return fmt.Sprintf("jetstream: KV bucket %s on the NATS server (shared)", kv.Bucket)
	case kv.Adapter == config.KeyValuePostgres:
		return fmt.Sprintf("postgres: table %s (shared)", kv.Table)
	}
	return string(kv.Adapter) + " (shared)"
}

func whereObjects(cfg *config.Config, local string) string {
	o := cfg.Services.ObjectStorage
	switch {
	case local != "":
		return fmt.Sprintf("%s: %s (this host)", o.Adapter, local)
	case o.Adapter == config.ObjectStorageJetStream:
		return fmt.Sprintf("jetstream: object store %s on the NATS server (shared)", o.Bucket)
	}
	return string(o.Adapter) + " (shared)"
}

func sharedVerdict(e config.Engine, local []string) string {
	switch {
	case e.Role == config.RoleClient:
		return "not checked: a client engine opens no backend"
	case e.Role == config.RoleAuto:
		return "not checked: an auto engine claims without a rollout id, so it never stands by"
	case len(local) == 0 && e.RolloutID != "":
		return "every service is shared: rollout " + e.RolloutID + " can hand over without downtime"
	case len(local) == 0:
		return "every service is shared: set a rollout id per deploy (" + config.EnvRolloutID + ") to hand over without downtime"
	}
	return strings.Join(local, ", ") + " keep their data on this host: fine without a rollout id " +
		"(deploy stop-then-start); a rollout id would be refused"
}

// whereNATS says which broker the engine uses; with nats.url empty that depends on the
// role: every one first looks for a NATS server at nats.embedded.listen; a serving
// engine claims through one it finds, or starts the embedded broker.
func whereNATS(n config.NATS) string {
	if !n.EmbeddedBroker() {
		return redact.URLList(strings.Join(n.Servers(), ", "))
	}
	embedded := fmt.Sprintf("embedded NATS server on %s, store under %s (this host)", n.Embedded.Listen, n.Embedded.StoreDir)
	url, err := n.EmbeddedURL()
	switch {
	case n.Engine.Role == config.RoleServe && err != nil:
		return embedded + ", unless another engine's broker holds that store (then it claims through that one)"
	case n.Engine.Role == config.RoleServe:
		return "the NATS server at " + url + " when one answers there (it claims the lease through it: refused, exit 3, next to an engine that serves); else an " + embedded
	case n.Engine.Role == config.RoleClient && err != nil:
		return "none: " + err.Error()
	case n.Engine.Role == config.RoleClient:
		return "the NATS server at " + url + " (a serving engine's embedded one); a client starts none, and exits 1 when none answers"
	case err != nil:
		return embedded
	}
	return "the NATS server at " + url + " when one answers there (then a client of the engine serving on it, or serving itself); else an " + embedded
}
