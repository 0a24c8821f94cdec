package main

import (
	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/thejerf/suture/v4"
	"go.uber.org/zap"
)

// newEngine is the engine of `abi-engine run`: the root package's Engine, logging
// through log, writing version into the lease record, its services in tree, with the
// fail points fp (nil: none).
func newEngine(cfg *config.Config, log *zap.Logger, version string, tree *suture.Supervisor, fp *failpoint.Set) (runnableEngine, error) {
	e, err := engine.New(cfg, engine.WithLogger(log), engine.WithVersion(version), engine.WithSupervisor(tree), engine.WithFailpoints(fp))
	if err != nil {
		return nil, err
	}
	return e, nil
}
