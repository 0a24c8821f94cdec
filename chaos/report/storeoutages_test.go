package report

import (
	"strings"
	"testing"
	"time"
)

// TestTableListsTheStoreOutages: the lease stream's stretches without a leader are a
// figure of their own, the ones longer than the lease listed.
func TestTableListsTheStoreOutages(t *testing.T) {
	r := sample(t)
	r.StoreOutages = []StoreOutage{
		{At: start.Add(2 * time.Second), For: 40 * time.Millisecond},
		{At: start.Add(5 * time.Second), For: 5300 * time.Millisecond},
		{At: start.Add(9 * time.Second), For: 60 * time.Millisecond},
	}
	var b strings.Builder
	if err := r.Table(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"lease stream without a leader (no engine can renew or take the lease; not judged): 3 times, median 60.0ms, max 5300.0ms; 1 longer than the lease",
		"NO LEADER FROM  FOR",
		"+5.000s         5300.0ms",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "+2.000s         40.0ms") {
		t.Errorf("an outage shorter than the lease is listed:\n%s", b.String())
	}
}
