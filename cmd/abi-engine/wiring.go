package main

import (
	"context"
	"time"

	engine "github.com/abi-engine/engine"
	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/failpoint"
	"github.com/abi-engine/engine/internal/telemetry"
	"github.com/thejerf/suture/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
)

// newEngine is the engine of `abi-engine run`: the root package's Engine, logging
// through log, writing version into the lease record, its services in tree, with the
// fail points fp (nil: none), exporting traces when telemetry.otlp_endpoint is set.
func newEngine(cfg *config.Config, log *zap.Logger, version string, tree *suture.Supervisor, fp *failpoint.Set) (runnableEngine, error) {
	opts := []engine.Option{engine.WithLogger(log), engine.WithVersion(version), engine.WithSupervisor(tree), engine.WithFailpoints(fp)}
	if t := cfg.Telemetry; t.Tracing() {
		tp, err := telemetry.NewProvider(telemetry.Settings{Endpoint: t.OTLPEndpoint, Insecure: t.OTLPInsecure,
			SampleRatio: t.SampleRatio, ServiceName: t.ServiceName, Version: version})
		if err != nil {
			return nil, err
		}
		if tree != nil {
			tree.Add(tracerService{tp: tp, log: log})
		}
		opts = append(opts, engine.WithTracerProvider(tp))
		log.Info("exporting traces over OTLP/HTTP", zap.String("endpoint", t.OTLPEndpoint), zap.Float64("sample_ratio", t.SampleRatio))
	}
	e, err := engine.New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// tracerShutdownTimeout bounds sending the last spans at exit.
const tracerShutdownTimeout = 5 * time.Second

// tracerService owns the tracer provider in the process's tree: when the tree stops,
// it sends the spans still batched and stops the exporter.
type tracerService struct {
	tp  *sdktrace.TracerProvider
	log *zap.Logger
}

func (s tracerService) String() string { return "telemetry" }

func (s tracerService) Serve(ctx context.Context) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), tracerShutdownTimeout)
	defer cancel()
	if err := s.tp.Shutdown(sctx); err != nil {
		s.log.Warn("could not send the last spans", zap.Error(err))
	}
	return suture.ErrDoNotRestart
}
