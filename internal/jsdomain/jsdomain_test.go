package jsdomain

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestSubjects: only $KV. subjects get the domain's prefix, and the caller's message
// is left as it was (a backend reads its subject again after the publish).
func TestSubjects(t *testing.T) {
	j := &inDomain{prefix: "$JS.hub.API."}
	for in, want := range map[string]string{
		"$KV.ABI_KV.abi.epoch.3":  "$JS.hub.API.$KV.ABI_KV.abi.epoch.3",
		"$O.ABI_OBJECTS.C.x":      "$O.ABI_OBJECTS.C.x",
		"abi.svc.keyvalue.v1.get": "abi.svc.keyvalue.v1.get",
	} {
		m := &nats.Msg{Subject: in, Header: nats.Header{"K": {"v"}}, Data: []byte("d")}
		got := j.msg(m)
		if got.Subject != want || string(got.Data) != "d" || got.Header.Get("K") != "v" {
			t.Errorf("%s: published as %+v, want subject %s with the same header and data", in, got, want)
		}
		if m.Subject != in {
			t.Errorf("%s: the caller's message became %s", in, m.Subject)
		}
	}
}
