package runner

import (
	"errors"
	"fmt"
)

// Exit codes of an engine process and of every abi-engine command (docs/design.md
// §4.6): the one definition, which `abi-engine` and the chaos harness's engine
// processes both exit with.
const (
	ExitOK      = 0
	ExitRuntime = 1 // the command could not do its job
	ExitUsage   = 2 // bad arguments or configuration; nothing was touched
	ExitServing = 3 // another engine serves this NATS account
)

// ExitError ends a command with an exit code. A nil Err means the command already
// printed what went wrong.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Usage is err with ExitUsage.
func Usage(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// Runtime is err with ExitRuntime.
func Runtime(err error) error { return &ExitError{Code: ExitRuntime, Err: err} }

// ExitCode is the exit code of err as Run returns it: ExitOK for nil, an ExitError's
// code, and ExitRuntime for any other error.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitRuntime
}
