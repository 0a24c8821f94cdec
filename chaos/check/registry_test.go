package check

import (
	"strings"
	"testing"
	"time"
)

func TestRegistryKept(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	instances := map[string]string{"a1": "m.a", "a2": "m.a", "b1": "m.b"}
	base := []ModuleCall{
		{Op: "register", Instance: "a1", Invoke: at(0), Complete: at(10)},
		{Op: "register", Instance: "a2", Invoke: at(0), Complete: at(10)},
		{Op: "register", Instance: "b1", Invoke: at(0), Complete: at(10)},
		{Op: "renew", Instance: "a1", Invoke: at(1000), Complete: at(1010)},
	}
	lease, tol := 2*time.Second, 50*time.Millisecond
	cases := []struct {
		name  string
		reads []ModuleCall
		want  string // "" passes
	}{
		{"all there", []ModuleCall{
			{Op: "get_module", Module: "m.a", Invoke: at(500), Complete: at(510), Seen: []string{"a1", "a2"}},
			{Op: "list_modules", Invoke: at(600), Complete: at(610), Seen: []string{"a1", "a2", "b1"}},
		}, ""},
		{"a read before the write committed may miss it", []ModuleCall{
			{Op: "get_module", Module: "m.a", Invoke: at(5), Complete: at(20), Seen: nil},
		}, ""},
		{"expired after the lease may be missed", []ModuleCall{
			{Op: "get_module", Module: "m.a", Invoke: at(2500), Complete: at(2510), Seen: []string{"a1"}},
		}, ""},
		{"unregistered", []ModuleCall{
			{Op: "unregister", Instance: "a1", Invoke: at(1100), Complete: at(1110)},
			{Op: "get_module", Module: "m.a", Invoke: at(1200), Complete: at(1210), Seen: []string{"a2"}},
		}, ""},
		{"a failed read judges nothing", []ModuleCall{
			{Op: "get_module", Module: "m.a", Invoke: at(500), Complete: at(510), Err: "timeout"},
		}, ""},
		{"a renewed instance missing", []ModuleCall{
			{Op: "get_module", Module: "m.a", Invoke: at(2500), Complete: at(2510), Seen: []string{"a2"}},
		}, "missed instance a1"},
		{"missing from a listing", []ModuleCall{
			{Op: "list_modules", Invoke: at(500), Complete: at(510), Seen: []string{"a1", "a2"}},
		}, "missed instance b1"},
		{"twice", []ModuleCall{
			{Op: "get_module", Module: "m.b", Invoke: at(500), Complete: at(510), Seen: []string{"b1", "b1"}},
		}, "b1 2 times"},
		{"unknown", []ModuleCall{
			{Op: "get_module", Module: "m.b", Invoke: at(500), Complete: at(510), Seen: []string{"b1", "x"}},
		}, "nobody registered"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := RegistryKept(append(append([]ModuleCall(nil), base...), c.reads...), instances, lease, tol)
			switch {
			case c.want == "" && !r.Passed:
				t.Fatalf("failed: %s %v", r.Summary, r.Details)
			case c.want != "" && (r.Passed || !strings.Contains(strings.Join(r.Details, "\n"), c.want)):
				t.Fatalf("want a violation %q: %+v", c.want, r)
			}
		})
	}
}
