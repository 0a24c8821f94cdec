package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/abi-engine/engine/config"
	"go.uber.org/zap"
)

func fieldEvent(e string) zap.Field { return zap.String("event", e) }

func logLine(t *testing.T, format string, w interface {
	Write([]byte) (int, error)
}) {
	t.Helper()
	log, err := newLogger(format, "info", w)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello", fieldEvent("acquired"))
	_ = log.Sync()
}

func TestLogFormatAutoIsJSONWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	logLine(t, config.LogFormatAuto, &buf)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["msg"] != "hello" {
		t.Fatalf("auto to a buffer: %q is not a JSON line (%v)", buf.String(), err)
	}
	// /dev/null is a character device, but no terminal.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Error("/dev/null taken for a terminal")
	}
}

func TestLogFormatAutoIsConsoleOnATerminal(t *testing.T) {
	tty, read := openPTY(t)
	logLine(t, config.LogFormatAuto, tty)
	line := read()
	if strings.HasPrefix(line, "{") || !strings.Contains(line, "INFO") || !strings.Contains(line, "hello") {
		t.Fatalf("auto on a terminal wrote %q, want a console line", line)
	}
	// log.format json wins over the terminal.
	logLine(t, "json", tty)
	if line := read(); !strings.HasPrefix(line, "{") {
		t.Fatalf("json on a terminal wrote %q", line)
	}
}
