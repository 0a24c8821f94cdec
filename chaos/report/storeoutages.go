package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// StoreOutage is a stretch the lease's store could take no write, whatever an engine
// did: on a cluster, the lease stream had no leader (its leader's node stopped, and
// the others had yet to elect one). It is a figure of the broker, not a check: the
// serving-gap check leaves these stretches out.
type StoreOutage struct {
	// At is when the stream lost its leader, For how long it had none.
	At  time.Time     `json:"at"`
	For time.Duration `json:"for_ns"`
}

// writeStoreOutages prints the store's outages: a summary line, then one line each
// that lasted longer than the lease (the ones a serving gap would have counted).
func (r *Report) writeStoreOutages(w io.Writer) error {
	if len(r.StoreOutages) == 0 {
		return nil
	}
	ds := make([]time.Duration, len(r.StoreOutages))
	var long []StoreOutage
	for i, o := range r.StoreOutages {
		ds[i] = o.For
		if o.For > r.Lease {
			long = append(long, o)
		}
	}
	fmt.Fprintf(w, "\nlease stream without a leader (no engine can renew or take the lease; not judged): %d times, %s; %d longer than the lease\n",
		len(ds), medianMax(ds), len(long))
	if len(long) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NO LEADER FROM\tFOR")
	for _, o := range long {
		fmt.Fprintf(tw, "+%s\t%s\n", offset(o.At.Sub(r.Start)), ms(o.For))
	}
	return tw.Flush()
}
