package e2e

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/natstest"
	"github.com/abi-engine/engine/internal/testproc"
	"github.com/abi-engine/engine/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// metric reads one sample of the process's /metrics, -1 when it is absent.
func (p *proc) metric(t testing.TB, sample string) float64 {
	t.Helper()
	_, body, err := p.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDeletedDataBucketIsRecreatedUnderTraffic is issue 10 item 3: with the keyvalue
// bucket deleted under a serving engine, calls fail for a moment, the failures are
// logged and counted by backend, the engine recreates its bucket with the configured
// settings, and calls succeed again without a restart.
func TestDeletedDataBucketIsRecreatedUnderTraffic(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitState("serving", 20*time.Second)
	id := a.instanceID()
	tf := startTraffic(t, srv.URL(), 2)
	tf.waitAnswers(t, id, 50, 20*time.Second)
	ctx := ctxFor(t, 60*time.Second)
	if err := js.DeleteKeyValue(ctx, "ABI_KV"); err != nil {
		t.Fatal(err)
	}
	deleted := tf.answeredBy(id)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := js.KeyValue(ctx, "ABI_KV"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the engine did not recreate the keyvalue bucket within 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	tf.waitAnswers(t, id, deleted+200, 20*time.Second)
	tf.halt()
	st, err := js.Stream(ctx, "KV_ABI_KV")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.AllowDirect || !c.AllowMsgTTL || c.Replicas != 1 {
		t.Fatalf("recreated with %+v", c)
	}
	if n := a.metric(t, `abi_engine_backend_errors_total{backend="jetstream",service="keyvalue"}`); n < 1 {
		t.Errorf("backend errors counted: %v, want at least one", n)
	}
	a.waitLog(`"msg":"backend call failed"`, time.Second)
	a.waitLog("recreated it", time.Second)
	a.waitHTTP("/readyz", 200, 5*time.Second)
	a.waitState("serving", time.Second)
	if strings.Count(a.out.String(), `"msg":"backend call failed"`) > 5 {
		t.Errorf("the failures were not rate-limited:\n%s", a.out.String())
	}
}

// TestBackendThatStaysDownFailsReadiness is issue 10 item 3's other half: while a
// backend stays down (its bucket deleted and the broker refusing to recreate it),
// /readyz answers 503 naming it, and once it can be recreated the engine is ready again.
func TestBackendThatStaysDownFailsReadiness(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	a := start(t, "A", engineConfig{NATSURL: srv.URL(), HTTPPort: testproc.FreePort(t)})
	a.waitHTTP("/readyz", 200, 20*time.Second)
	ctx := ctxFor(t, 60*time.Second)
	if err := js.DeleteKeyValue(ctx, "ABI_KV"); err != nil {
		t.Fatal(err)
	}
	// Another stream takes the bucket's subjects: the broker refuses to recreate it.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SQUATTER", Subjects: []string{"$KV.ABI_KV.>"}}); err != nil {
		t.Fatal(err)
	}
	tr, err := client.NewTransport(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv := client.NewKeyValue(tr)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, _, err = kv.Get(cctx, "k")
	cancel()
	if !errors.Is(err, protocol.ErrUnavailable) {
		t.Fatalf("get with the bucket gone = %v, want UNAVAILABLE", err)
	}
	body := a.waitHTTP("/readyz", 503, 10*time.Second)
	if !strings.Contains(body, "keyvalue backend (jetstream) down") {
		t.Errorf("/readyz body %q does not name the backend", body)
	}
	if _, status, _ := a.get("/status"); !strings.Contains(status, `"service": "keyvalue"`) || !strings.Contains(status, `"up": false`) {
		t.Errorf("/status does not show the backend down:\n%s", status)
	}
	if v := a.metric(t, `abi_engine_backend_up{backend="jetstream",service="keyvalue"}`); v != 0 {
		t.Errorf("abi_engine_backend_up = %v, want 0", v)
	}
	a.waitLog("backend down", time.Second)
	if err := js.DeleteStream(ctx, "SQUATTER"); err != nil {
		t.Fatal(err)
	}
	a.waitHTTP("/readyz", 200, 20*time.Second)
	if _, _, err := kv.Get(ctx, "k"); err != nil {
		t.Fatalf("get once the bucket is back: %v", err)
	}
}
