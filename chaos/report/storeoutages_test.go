package report

import (
	"strings"
	"testing"
	"time"
)

// TestTableListsTheStoreOutages: the streams' stretches without a leader are a figure
// of their own, in time order, the ones longer than the lease listed.
func TestTableListsTheStoreOutages(t *testing.T) {
	r := sample(t)
	r.StoreOutages = []StoreOutage{
		{Stream: "KV_ABI_ENGINE", At: start.Add(2 * time.Second), For: 40 * time.Millisecond},
		{Stream: "KV_ABI_ENGINE", At: start.Add(9 * time.Second), For: 60 * time.Millisecond},
		{Stream: "KV_ABI_KV", At: start.Add(5 * time.Second), For: 5300 * time.Millisecond},
	}
	var b strings.Builder
	if err := r.Table(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"streams without a leader (nothing can write them; not judged): 3 times, median 60.0ms, max 5300.0ms; 1 longer than the lease",
		"STREAM     NO LEADER FROM  FOR",
		"KV_ABI_KV  +5.000s         5300.0ms",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "40.0ms") {
		t.Errorf("an outage shorter than the lease is listed:\n%s", b.String())
	}
}
