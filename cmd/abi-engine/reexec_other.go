//go:build !unix

package main

import (
	"fmt"
	"io"
)

// reexecAsStandby: a process cannot replace itself here; step-down --stay exits as
// step-down does, and says so.
func reexecAsStandby(stderr io.Writer) int {
	fmt.Fprintln(stderr, "abi-engine: step-down --stay: this platform cannot start the process again: start it again as a standby")
	return exitRuntime
}
