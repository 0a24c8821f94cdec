package supervisor

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestBrokerTakesItsSettings: the ping and sync settings reach the embedded server, as
// its own varz reports them on the monitoring address it serves.
func TestBrokerTakesItsSettings(t *testing.T) {
	b, err := NewBroker("127.0.0.1:0", t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Configure(BrokerSettings{PingInterval: 5 * time.Second, PingMax: 3, SyncAlways: true, HTTPListen: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	tree := NewTree("test", zap.NewNop(), 5*time.Second)
	tree.Add(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := tree.ServeBackground(ctx)
	defer func() {
		cancel()
		<-done
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := b.URL(wctx); err != nil {
		t.Fatal(err)
	}
	mon := b.MonitorURL()
	if !strings.HasPrefix(mon, "http://127.0.0.1:") {
		t.Fatalf("MonitorURL() = %q, want http://127.0.0.1:PORT", mon)
	}
	req, err := http.NewRequestWithContext(wctx, http.MethodGet, mon+"/varz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Name         string        `json:"server_name"`
		PingInterval time.Duration `json:"ping_interval"`
		PingMax      int           `json:"ping_max"`
		JetStream    struct {
			Config struct {
				SyncAlways bool `json:"sync_always"`
			} `json:"config"`
		} `json:"jetstream"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Name != EmbeddedServerName || v.PingInterval != 5*time.Second || v.PingMax != 3 || !v.JetStream.Config.SyncAlways {
		t.Errorf("varz: %+v, want %s, ping_interval 5s, ping_max 3, sync_always", v, EmbeddedServerName)
	}
	http.DefaultClient.CloseIdleConnections()

	if err := b.Configure(BrokerSettings{HTTPListen: "8222"}); err == nil || !strings.Contains(err.Error(), `"8222"`) {
		t.Errorf("Configure with a monitoring address without a port: %v, want an error naming it", err)
	}
}
