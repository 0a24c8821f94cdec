package sessions

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/abi-engine/engine/internal/natstest"
)

// TestStopWithoutTheBrokerDoesNotWarn: Stop's round trip after its UNSUBs is a
// courtesy (the subscriptions are gone on the client already), so a broker that does
// not answer it, as at an exit after the broker went away, is not worth a warning
// (issue 10 item 9). It is logged, at Info, through the zap logger the host was given
// (issue 11: one logger).
func TestStopWithoutTheBrokerDoesNotWarn(t *testing.T) {
	srv := natstest.Start(t)
	core, logs := observer.New(zapcore.DebugLevel)
	h := startHost(t, connect(t, srv), TransferConfig{Logger: zap.New(core), Handlers: map[string]Handler{
		"get": func(context.Context, TransferRequest) ([]byte, error) { return nil, nil },
	}})
	srv.Stop()
	h.Stop()
	told := false
	for _, e := range logs.All() {
		if e.Level >= zapcore.WarnLevel {
			t.Errorf("Stop logged %s: %s", e.Level, e.Message)
		}
		if e.Message == "the broker did not confirm the UNSUBs of a stopped transfer host" && e.ContextMap()["prefix"] == testPrefix {
			told = true
		}
	}
	if !told {
		t.Errorf("Stop did not log, through the host's zap logger, that the broker did not confirm: %v", logs.All())
	}
}
