package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3". Nothing
// writes it at run time.
var version string

// buildVersion is the version written into the lease record and printed by
// `abi-engine version`: the one set by -ldflags, else the module version of a
// `go install`ed binary, else the VCS revision the binary was built from.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionFromBuildInfo(info)
}

func versionFromBuildInfo(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "dev-" + rev
	if dirty {
		v += "-dirty"
	}
	return v
}

func (c *cli) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(c.stdout, c.versionLine())
			return nil
		},
	}
}

// versionLine is what version and --version print.
func (c *cli) versionLine() string {
	return fmt.Sprintf("abi-engine %s (%s %s/%s)", c.version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
