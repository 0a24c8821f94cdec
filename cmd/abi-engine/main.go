package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/abi-engine/engine/internal/redact"
	"github.com/abi-engine/engine/internal/runner"
	"github.com/spf13/cobra"
)

// Exit codes of docs/design.md §4.6, as internal/runner defines them.
const (
	exitOK      = runner.ExitOK
	exitRuntime = runner.ExitRuntime
	exitUsage   = runner.ExitUsage
	exitServing = runner.ExitServing
)

func main() {
	c := newCLI(os.Getenv, os.Stdout, os.Stderr)
	c.stdin = os.Stdin
	code := c.execute(context.Background(), os.Args[1:])
	if code == exitOK && c.stayAsStandby {
		// abi-engine step-down --stay: this process handed over; it comes back as a
		// hot standby, with the same pid, arguments and environment.
		code = reexecAsStandby(os.Stderr)
	}
	os.Exit(code)
}

// run is the whole program but os.Exit: it parses args, runs the command and returns the
// exit code, reading the environment only through env.
func run(args []string, env func(string) string, stdout, stderr io.Writer) int {
	return newCLI(env, stdout, stderr).execute(context.Background(), args)
}

func newCLI(env func(string) string, stdout, stderr io.Writer) *cli {
	return &cli{
		env:       env,
		stdout:    stdout,
		stderr:    stderr,
		version:   buildVersion(),
		newEngine: newEngine,
		signals:   newSignals,
		routeSlog: true,
		memLimit:  true,
	}
}

// cli holds what every command reads and writes, so tests run commands in-process with
// an environment, outputs and an engine of their own.
type cli struct {
	env     func(string) string
	stdin   io.Reader // call's body with "-"; nil in tests that give none
	stdout  io.Writer
	stderr  io.Writer
	version string
	// newEngine builds the engine of `abi-engine run`.
	newEngine engineFactory
	// signals builds the service that turns stop requests into calls of first and second.
	signals signalSource
	// routeSlog sends the process's default slog logger (hollywood logs through it) to
	// the zap logger of `run`. Only the real process sets it: it is process-wide.
	routeSlog bool
	// stayAsStandby: `run` ended by a step-down with --stay; main starts the process
	// again as a hot standby.
	stayAsStandby bool
	// memLimit gives the Go runtime the soft memory limit of the limits block
	// (config.Limits.RuntimeMemoryLimit) unless GOMEMLIMIT is set. Only the real
	// process sets it: it is process-wide.
	memLimit bool
}

// exitError ends a command with an exit code (internal/runner's). A nil Err means the
// command already printed what went wrong.
type exitError = runner.ExitError

func usageError(err error) error   { return runner.Usage(err) }
func runtimeError(err error) error { return runner.Runtime(err) }

func (c *cli) execute(ctx context.Context, args []string) int {
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	root := c.rootCommand()
	root.SetArgs(args)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			// The commands redact what they put in errors; this is the last line of
			// defence before the terminal.
			fmt.Fprintf(c.stderr, "abi-engine: %s\n", redact.String(ee.Err.Error()))
		}
		if ee.Code == exitUsage && isFlagOrArgError(ee.Err) {
			fmt.Fprintln(c.stderr, "Run 'abi-engine --help' for usage.")
		}
		return ee.Code
	}
	// Everything cobra itself reports (an unknown command, a wrong number of arguments)
	// is a usage error.
	fmt.Fprintf(c.stderr, "abi-engine: %v\nRun 'abi-engine --help' for usage.\n", err)
	return exitUsage
}

// flagError is a flag cobra could not parse or a flag value the command refused.
type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

func isFlagOrArgError(err error) bool {
	var fe *flagError
	return errors.As(err, &fe)
}

func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "abi-engine",
		Short: "Serve kernel services over NATS, one engine per account",
		Long: `abi-engine serves kernel services over NATS and guarantees that exactly one engine
serves them per NATS account, by an ownership lease in the JetStream KV bucket ABI_ENGINE.

Exit codes: 0 ok, 1 runtime error, 2 usage or configuration error,
3 another engine serves (the message names it).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Bare `abi-engine` is a usage error: it names no command.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(c.stderr)
			_ = cmd.Help()
			return &exitError{Code: exitUsage}
		},
	}
	// abi-engine --version prints what abi-engine version prints.
	root.Version = c.version
	root.SetVersionTemplate(c.versionLine() + "\n")
	// `abi-engine completion bash|zsh|fish|powershell` is cobra's: it completes the
	// commands and flags of this tree, so it cannot fall behind them.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError(&flagError{err})
	})
	root.AddCommand(
		c.runCommand(),
		c.statusCommand(),
		c.stepDownCommand(),
		c.evictCommand(),
		c.callCommand(),
		c.modulesCommand(),
		c.configCommand(),
		c.versionCommand(),
		c.benchCommand(),
		c.chaosCommand(),
		c.doctorCommand(),
		c.manCommand(root),
	)
	return root
}
