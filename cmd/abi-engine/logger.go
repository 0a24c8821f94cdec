package main

import (
	"fmt"
	"io"
	"os"

	"github.com/abi-engine/engine/config"
	"github.com/abi-engine/engine/internal/redact"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

// newLogger is zap's production logger writing to w, JSON or console (auto: console
// when w is a terminal, where a person reads it, JSON otherwise), without
// sampling: every lease event (fenced, lost, standby timed out) is logged, however many
// come in a second. Every line is redacted on its way out: the engine redacts the URLs
// it logs, and this catches a secret in a message of a library or in a field nobody
// thought of. No line up to ERROR carries a Go stack trace: an operator's log says what
// happened and to whom; a stack says nothing to them (a panic's line carries its own).
func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	if format == config.LogFormatAuto {
		format = "json"
		if isTerminal(w) {
			format = "console"
		}
	}
	var encoder zapcore.Encoder
	switch format {
	case "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log format %q: must be json, console or auto", format)
	}
	out := zapcore.Lock(zapcore.AddSync(redact.Writer(w)))
	core := zapcore.NewCore(encoder, out, zap.NewAtomicLevelAt(lvl))
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zap.DPanicLevel), zap.ErrorOutput(out)), nil
}

// isTerminal reports whether w is a terminal. (A character device is not enough:
// /dev/null is one.)
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
