package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/abi-engine/engine/discovery"
	"github.com/abi-engine/engine/internal/jsbucket"
)

// checkDiscoveryBucket checks the module registry's bucket ABI_DISCOVERY_<project> when
// nats.discovery is on: file storage and no max age (else the registry, every module's
// registration, vanishes by itself: a FAIL), history 1 and the configured replicas as
// the serving engine creates it (an existing bucket keeps what it has: a WARN).
func (d *doctor) checkDiscoveryBucket(parent context.Context) {
	disc := d.cfg.NATS.Discovery
	if disc == nil {
		return
	}
	const check = "discovery bucket"
	const key = "nats.engine.lease_replicas"
	replicas := max(d.cfg.NATS.Engine.LeaseReplicas, 1)
	spec := discovery.BucketSpec(disc.Project, replicas)
	spec.Require = []jsbucket.Setting{jsbucket.FileStorage(), jsbucket.NoMaxAge()}
	bucket := discovery.Bucket(disc.Project)
	ctx, cancel := d.ctx(parent)
	defer cancel()
	cfg, found, err := jsbucket.Inspect(ctx, d.js, spec)
	var shape *jsbucket.ShapeError
	switch {
	case errors.As(err, &shape):
		d.add(finding{Check: check, Verdict: verdictFail,
			Reason: shape.Error() + ": the registry can vanish by itself (an age limit, a server restart), and every module's registration with it",
			Fix: "nats stream edit " + shape.Stream + " --max-age 0 for a TTL; storage cannot be edited: nats kv del " + bucket +
				" (the serving engine recreates it, and the modules register again at their next renew)"})
		return
	case err != nil:
		d.add(finding{Check: check, Verdict: verdictFail, Reason: err.Error(), Fix: "check the user's permissions for $JS.API.STREAM.INFO.>"})
		return
	}
	if !found {
		if f, bad := d.replicasAgainstCluster(check, key, replicas); bad {
			d.add(f)
			return
		}
		d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf(
			"%s does not exist yet: the serving engine creates it with history 1, file storage, no TTL, R%d", bucket, replicas)})
		return
	}
	if cfg.MaxMsgsPerSubject != 1 {
		d.add(finding{Check: check, Verdict: verdictWarn,
			Reason: fmt.Sprintf("stream %s keeps %d revision(s) of the registry, want 1 (as the engines create it): every older copy of up to 512 KiB is kept for nothing", cfg.Name, cfg.MaxMsgsPerSubject),
			Fix:    fmt.Sprintf("nats stream edit %s --max-msgs-per-subject 1", cfg.Name)})
		return
	}
	if f, bad := d.existingReplicas(check, key, cfg, replicas); bad {
		d.add(f)
		return
	}
	d.add(finding{Check: check, Verdict: verdictOK, Reason: fmt.Sprintf("stream %s: history 1, file storage, no TTL, R%d", cfg.Name, replicas)})
}
