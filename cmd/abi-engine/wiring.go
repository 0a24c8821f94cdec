package main

import (
	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/config"
	"go.uber.org/zap"
)

// newEngine is the engine of `abi-engine run`: the root package's Engine, logging
// through log and writing version into the lease record.
func newEngine(cfg *config.Config, log *zap.Logger, version string) (runnableEngine, error) {
	e, err := engine.New(cfg, engine.WithLogger(log), engine.WithVersion(version))
	if err != nil {
		return nil, err
	}
	return e, nil
}
