package sessions

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
)

// records keeps the slog records a host logs.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// TestStopWithoutTheBrokerDoesNotWarn: Stop's round trip after its UNSUBs is a
// courtesy (the subscriptions are gone on the client already), so a broker that does
// not answer it, as at an exit after the broker went away, is not worth a warning
// (issue 10 item 9).
func TestStopWithoutTheBrokerDoesNotWarn(t *testing.T) {
	srv := natstest.Start(t)
	logs := &records{}
	h := startHost(t, connect(t, srv), TransferConfig{Logger: slog.New(logs), Handlers: map[string]Handler{
		"get": func(context.Context, TransferRequest) ([]byte, error) { return nil, nil },
	}})
	srv.Stop()
	h.Stop()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, rec := range logs.recs {
		if rec.Level >= slog.LevelWarn && strings.Contains(rec.Message, "did not confirm") {
			t.Errorf("Stop logged %s: %s", rec.Level, rec.Message)
		}
	}
}
