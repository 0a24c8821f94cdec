//go:build unix

package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/abi-engine/engine/config"
)

// reexecAsStandby replaces the process with the same command run again as a hot
// standby (ABI_ENGINE_STANDBY=hot wins over the file): after step-down --stay the old
// engine waits for the lease again, whatever the successor's rollout. It returns only
// when the exec fails.
func reexecAsStandby(stderr io.Writer) int {
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, append(os.Environ(), config.EnvStandby+"="+string(config.StandbyHot)))
	}
	fmt.Fprintf(stderr, "abi-engine: step-down --stay: could not start again as a standby: %v\n", err)
	return exitRuntime
}
