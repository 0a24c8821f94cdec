package chaos

import (
	"errors"
	"fmt"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/internal/failpoint"
)

// Failpoints switches fail points on in a run's engines (package internal/failpoint),
// each a spec as ABI_FAILPOINTS takes it (skip-epoch,clock-rate=1.5). They exist only
// in a build with the tag failpoints: the harness's own for the engines it runs in its
// process, and Options.Binary for its engine processes (`go build -tags failpoints`).
// A scenario adds its own (clock-skew's fast clock, zombie-write's stall); an entry
// given here replaces the scenario's of the same name.
type Failpoints struct {
	// Holder is for the first engine the scenario starts: the one that serves first,
	// the first one the faults hit.
	Holder string
	// Others is for every engine started after it.
	Others string
}

func (f Failpoints) empty() bool { return f.Holder == "" && f.Others == "" }

var (
	// ErrNoFailpoints is why Run refuses a scenario, or Options.Failpoints, that needs
	// fail points in a build without them.
	ErrNoFailpoints = errors.New("chaos: this build has no fail points (build abi-engine, or run go test, with -tags failpoints)")
)

// failpointSpec is the spec of the next engine the harness starts: the scenario's
// extra entries, then the options' for its role (the first engine started, or the
// others), which win. It refuses a spec in a build without fail points.
func (h *harness) failpointSpec(first bool, extra []string) (string, error) {
	mine := h.opts.Failpoints.Others
	if first {
		mine = h.opts.Failpoints.Holder
	}
	specs := append(append([]string(nil), extra...), mine)
	if !failpoint.Enabled {
		for _, s := range specs {
			if s != "" {
				return "", fmt.Errorf("%w: fail points %q", ErrNoFailpoints, s)
			}
		}
		return "", nil
	}
	spec, err := failpoint.Merge(specs...)
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	return spec, nil
}

// failpointOption is the engine option that switches spec's fail points on in an
// engine of this process; nil for none.
func failpointOption(spec string) (engine.Option, error) {
	if spec == "" || !failpoint.Enabled {
		return nil, nil
	}
	set, err := failpoint.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return engine.WithFailpoints(set), nil
}

// prerequisites refuses a run this build cannot make, saying what it needs.
func prerequisites(sc Scenario, opts Options) error {
	switch {
	case sc.Failpoints && !failpoint.Enabled:
		return fmt.Errorf("%w: scenario %s switches fail points on in its engines, so it needs them in the harness and in the engine binary", ErrNoFailpoints, sc.Name)
	case !opts.Failpoints.empty() && !failpoint.Enabled:
		return fmt.Errorf("%w: fail points %+v were asked for", ErrNoFailpoints, opts.Failpoints)
	case opts.KeyValue != KeyValueJetStream && opts.KeyValue != KeyValuePostgres:
		return fmt.Errorf("chaos: keyvalue backend %q is not %s or %s", opts.KeyValue, KeyValueJetStream, KeyValuePostgres)
	case opts.KeyValue == KeyValuePostgres && opts.PostgresURL == "":
		return errors.New("chaos: the postgres keyvalue backend needs the database's URL (Options.PostgresURL, --postgres-url)")
	case opts.ClockRate <= 0:
		return fmt.Errorf("chaos: clock rate %g is not positive", opts.ClockRate)
	}
	return nil
}
