package runner

import (
	"fmt"

	"github.com/abi-engine/engine/internal/failpoint"
)

// Failpoints reads ABI_FAILPOINTS from env: the fail points a -tags failpoints build
// switches on for the chaos harness. A build without them has none: rather than run as
// if it did, it refuses with the variable set, naming what was built (program) and how
// to build one with them (build).
func Failpoints(env func(string) string, program, build string) (*failpoint.Set, error) {
	spec := env(failpoint.EnvVar)
	if spec == "" {
		return nil, nil
	}
	if !failpoint.Enabled {
		return nil, fmt.Errorf("%s=%q is set, but this %s was built without fail points; unset it, or build one with them (%s)", failpoint.EnvVar, spec, program, build)
	}
	set, err := failpoint.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", failpoint.EnvVar, err)
	}
	return set, nil
}
