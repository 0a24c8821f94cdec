package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	discoveryclient "github.com/abi-engine/engine/client/discovery"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/servicetoken"
	pb "github.com/abi-engine/engine/proto/abi/discovery/v1"
)

func (c *cli) modulesCommand() *cobra.Command {
	var conn connFlags
	var caller, project string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "modules",
		Short: "List the module instances registered with the serving engine's discovery",
		Long: `modules lists every live instance of the module registry (docs/discovery.md) of a
project: its module, contract major, instance id, status, rollout, expiry and whether it
drains. The project is --project, else nats.discovery.project of the configuration, else
"default". The call carries a service token signed with --jwt-secret-file, else
ABI_JWT_SECRET_FILE, else nats.jwt_secret_file, for the caller --caller.`,
		Example: `  abi-engine modules
  abi-engine modules --project acme --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cn, err := c.resolve(cmd, &conn, true)
			if err != nil {
				return err
			}
			b := cn.broker
			if !cmd.Flags().Changed("project") {
				project = config.DefaultDiscoveryProject
				if cn.cfg.NATS.Discovery != nil {
					project = cn.cfg.NATS.Discovery.Project
				}
			}
			if !config.ValidDiscoveryProject(project) {
				return usageError(&flagError{fmt.Errorf("--project %q: must be 1 to 64 letters, digits, '_' or '-'", project)})
			}
			secretFile := b.JWTSecretFile
			if secretFile == "" {
				return usageError(&flagError{fmt.Errorf("discovery needs a service token: set --jwt-secret-file or nats.jwt_secret_file")})
			}
			secret, err := servicetoken.ReadSecretFile(secretFile)
			if err != nil {
				return usageError(&flagError{fmt.Errorf("--jwt-secret-file: %w", err)})
			}
			if !cmd.Flags().Changed("timeout") {
				timeout = b.Timeout
			}
			nc, err := connect(b, "abi-engine modules")
			if err != nil {
				return err
			}
			defer nc.Close()
			token := func() (string, error) { return servicetoken.Mint(secret, caller, time.Now(), time.Hour) }
			cl, err := discoveryclient.New(nc, project, token, timeout)
			if err != nil {
				return usageError(&flagError{err})
			}
			instances, err := cl.ListModules(cmd.Context())
			if err != nil {
				return runtimeError(err)
			}
			now := time.Now()
			if asJSON {
				return printModulesJSON(c.stdout, project, instances, now)
			}
			return printModules(c.stdout, instances, now)
		},
	}
	conn.add(cmd)
	cmd.Flags().StringVar(&project, "project", "", "the discovery project (default: nats.discovery.project of abi-engine.yaml, else default)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the instances as JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for each reply (default: nats.client_timeout_seconds)")
	cmd.Flags().StringVar(&caller, "caller", "abi-engine-modules", "the service token's caller (its sub)")
	return cmd
}

// moduleJSON is one instance in modules --json.
type moduleJSON struct {
	ModuleID       string  `json:"module_id"`
	ContractMajor  uint32  `json:"contract_major"`
	PackageVersion string  `json:"package_version"`
	InstanceID     string  `json:"instance_id"`
	Status         string  `json:"status"`
	RolloutID      string  `json:"rollout_id"`
	ExpiresAt      string  `json:"expires_at"`
	ExpiresIn      float64 `json:"expires_in_seconds"`
	Draining       bool    `json:"draining"`
}

func expiry(at float64) time.Time {
	sec, frac := math.Modf(at)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

func printModulesJSON(w io.Writer, project string, instances []*pb.Instance, now time.Time) error {
	out := struct {
		Project   string       `json:"project"`
		Instances []moduleJSON `json:"instances"`
	}{Project: project, Instances: []moduleJSON{}}
	for _, in := range instances {
		d := in.GetDescriptor_()
		at := expiry(in.GetExpiresAt())
		out.Instances = append(out.Instances, moduleJSON{
			ModuleID: d.GetModuleId(), ContractMajor: d.GetContractMajor(), PackageVersion: d.GetPackageVersion(),
			InstanceID: in.GetInstanceId(), Status: in.GetStatus(), RolloutID: in.GetRolloutId(),
			ExpiresAt: at.Format(time.RFC3339Nano), ExpiresIn: math.Round(at.Sub(now).Seconds()*10) / 10,
			Draining: in.GetStatus() == "DRAINING",
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return runtimeError(err)
	}
	return nil
}

func printModules(w io.Writer, instances []*pb.Instance, now time.Time) error {
	if len(instances) == 0 {
		_, err := fmt.Fprintln(w, "no module instances registered")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tMAJOR\tINSTANCE\tSTATUS\tROLLOUT\tEXPIRES\tDRAINING")
	for _, in := range instances {
		d := in.GetDescriptor_()
		rollout := in.GetRolloutId()
		if rollout == "" {
			rollout = "-"
		}
		at := expiry(in.GetExpiresAt())
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s (in %.1fs)\t%v\n", d.GetModuleId(), d.GetContractMajor(), in.GetInstanceId(),
			in.GetStatus(), rollout, at.Format(time.RFC3339), at.Sub(now).Seconds(), in.GetStatus() == "DRAINING")
	}
	if err := tw.Flush(); err != nil {
		return runtimeError(err)
	}
	return nil
}
