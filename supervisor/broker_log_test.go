package supervisor

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestBrokerBannerIsDebug: nats-server's banner and routine notices are debug lines;
// at info the embedded broker says one thing, that it is ready.
func TestBrokerBannerIsDebug(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	b, err := NewBroker("127.0.0.1:0", t.TempDir(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	tree := NewTree("test", zap.NewNop(), 5*time.Second)
	tree.Add(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := tree.ServeBackground(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := b.URL(wctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if n := logs.FilterMessageSnippet("Starting nats-server").FilterLevelExact(zapcore.DebugLevel).Len(); n != 1 {
		t.Errorf("the banner's first line at debug: %d times, want 1", n)
	}
	var info []string
	for _, e := range logs.All() {
		if e.Level >= zapcore.InfoLevel {
			info = append(info, e.Message)
		}
	}
	if len(info) != 1 || info[0] != "embedded nats-server ready" {
		t.Errorf("lines at info and above: %q, want only the ready line", info)
	}
}
