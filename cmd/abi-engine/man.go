package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manCommand writes the man pages of the command tree: one page per command, made
// from the same cobra tree as --help, so they cannot drift from the binary. Hidden: it
// is for packagers and docs/operations.md, not for daily use.
func (c *cli) manCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages of every command into DIR",
		Long:   "man writes abi-engine.1 and one page per command (abi-engine-status.1, ...) into DIR,\ncreating it, from the same command tree as --help.",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return runtimeError(fmt.Errorf("man pages: %w", err))
			}
			root.DisableAutoGenTag = true // the same pages from the same binary
			header := &doc.GenManHeader{Title: "ABI-ENGINE", Section: "1", Source: "abi-engine " + c.version, Manual: "abi-engine manual"}
			if err := doc.GenManTree(root, header, dir); err != nil {
				return runtimeError(fmt.Errorf("man pages in %s: %w", dir, err))
			}
			fmt.Fprintf(c.stdout, "man pages of abi-engine %s written to %s\n", c.version, dir)
			return nil
		},
	}
}
