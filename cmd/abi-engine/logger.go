package main

import (
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger is zap's production logger writing to w, JSON or console, without
// sampling: every lease event (fenced, lost, standby timed out) is logged, however many
// come in a second.
func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch format {
	case "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log format %q: must be json or console", format)
	}
	out := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(encoder, out, zap.NewAtomicLevelAt(lvl))
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zap.ErrorLevel), zap.ErrorOutput(out)), nil
}
