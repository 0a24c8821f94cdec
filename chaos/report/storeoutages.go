package report

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// StoreOutage is a stretch a store of the engines could take no write, whatever an
// engine did: on a cluster, one of their streams had no leader (its leader's node
// stopped, and the others had yet to elect one). Without the lease's no engine can
// renew or take the lease; without a bucket's none can adopt its epoch there, nor
// answer its calls. It is a figure of the broker, not a check: the serving-gap check
// leaves these stretches out.
type StoreOutage struct {
	// Stream is the stream without a leader, At when it lost it, For how long it had
	// none.
	Stream string        `json:"stream"`
	At     time.Time     `json:"at"`
	For    time.Duration `json:"for_ns"`
}

// writeStoreOutages prints the stores' outages: a summary line, then one line each
// that lasted longer than the lease (the ones a serving gap would have counted).
func (r *Report) writeStoreOutages(w io.Writer) error {
	if len(r.StoreOutages) == 0 {
		return nil
	}
	outs := slices.Clone(r.StoreOutages)
	slices.SortStableFunc(outs, func(a, b StoreOutage) int { return a.At.Compare(b.At) })
	ds := make([]time.Duration, len(outs))
	var long []StoreOutage
	for i, o := range outs {
		ds[i] = o.For
		if o.For > r.Lease {
			long = append(long, o)
		}
	}
	fmt.Fprintf(w, "\nstreams without a leader (nothing can write them; not judged): %d times, %s; %d longer than the lease\n",
		len(ds), medianMax(ds), len(long))
	if len(long) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tNO LEADER FROM\tFOR")
	for _, o := range long {
		fmt.Fprintf(tw, "%s\t+%s\t%s\n", o.Stream, offset(o.At.Sub(r.Start)), ms(o.For))
	}
	return tw.Flush()
}
