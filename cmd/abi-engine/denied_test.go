package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/abi-engine/engine/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// limitedBroker is a broker with two users: "all", who may do anything, and "limited",
// who may only ask JetStream's account info and take replies: every command's real
// work is refused to it.
func limitedBroker(t *testing.T) (all, limited string) {
	t.Helper()
	srv := natstest.Start(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "all", Password: "pw"},
			{Username: "limited", Password: "pw", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.INFO"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}},
		}
	})
	hostPort := strings.TrimPrefix(srv.URL(), "nats://")
	return "nats://all:pw@" + hostPort, "nats://limited:pw@" + hostPort
}

// TestProcessCommandsWithoutPermissionFailAtOnce: call, step-down and evict --force run
// by a user the broker refuses fail at once, naming the subject refused and saying that
// nothing ran, instead of waiting their timeout (a minute here) and ending "context
// deadline exceeded", or, for call, "the call may have run".
func TestProcessCommandsWithoutPermissionFailAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	all, limited := limitedBroker(t)
	eng := startEngine(t, sharedEngineConfig(all))
	eng.waitReady(t)

	for _, tc := range []struct {
		args    []string
		subject string
	}{
		{[]string{"call", "keyvalue", "get", `{"key":"k"}`, "--timeout", "60s"}, `publish to "abi.svc.keyvalue.v1.get"`},
		{[]string{"step-down", "--timeout", "60s"}, `to "$JS.API.STREAM.INFO.KV_ABI_ENGINE"`},
		{[]string{"evict", "--force"}, `to "$JS.API.STREAM.INFO.KV_ABI_ENGINE"`},
	} {
		args := append(tc.args, "--nats", limited)
		code, out, errOut := runBinary(t, nil, args...)
		if code != exitRuntime {
			t.Errorf("%s: exit %d, want 1\n%s%s", tc.args[0], code, out, errOut)
			continue
		}
		wantContains(t, tc.args[0]+"'s error", errOut, "nothing ran: the broker refused this user's", tc.subject)
		for _, wrong := range []string{"deadline exceeded", "may have run", "UNAVAILABLE"} {
			if strings.Contains(errOut, wrong) {
				t.Errorf("%s says %q:\n%s", tc.args[0], wrong, errOut)
			}
		}
	}
	// The holder was neither asked nor evicted.
	if st := eng.status(t); st.State != "serving" {
		t.Errorf("the engine is %s after the refused commands, want serving", st.State)
	}
}

// TestDeniedErrorReadsTheBroker: the broker's permission violations, publish and
// subscription, name their subject; only a refused publish says nothing ran.
func TestDeniedErrorReadsTheBroker(t *testing.T) {
	pub := deniedError(fmt.Errorf("%w for Publish to \"abi.svc.keyvalue.v1.get\"", nats.ErrPermissionViolation))
	if pub == nil || pub.Operation != "publish" || pub.Subject != "abi.svc.keyvalue.v1.get" || !strings.Contains(pub.Error(), "nothing ran") {
		t.Errorf("publish: %+v (%v)", pub, pub)
	}
	sub := deniedError(fmt.Errorf("%w for Subscription to \"_INBOX.abc.*\"", nats.ErrPermissionViolation))
	if sub == nil || sub.Operation != "subscription" || sub.Subject != "_INBOX.abc.*" || strings.Contains(sub.Error(), "nothing ran") {
		t.Errorf("subscription: %+v (%v)", sub, sub)
	}
	if deniedError(nats.ErrTimeout) != nil {
		t.Error("a timeout read as a permission violation")
	}
}
