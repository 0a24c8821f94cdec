package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

const (
	// leadAttempts bounds the step-downs leadLike asks for: a server older than 2.11
	// ignores the preferred leader and elects any replica.
	leadAttempts = 6
	// leadWait bounds the wait for one election.
	leadWait = 5 * time.Second
	// infoWait bounds one stream info request during an election.
	infoWait = 250 * time.Millisecond
)

// leadLike moves the leader of the replicated stream scratch to the server that leads
// the stream like, so that the raw writes cross the same routes as the engine's: on a
// three-node cluster a put whose leader is the requester's own server saves two route
// crossings, which weighs more than the cost the comparison is after and would make
// the ratio a draw of where the scratch bucket's leader fell. A stream of one replica
// (or not clustered) has no leader to move.
func leadLike(ctx context.Context, j js.JetStream, like, scratch string) error {
	lst, err := j.Stream(ctx, like)
	if err != nil {
		return fmt.Errorf("bench: read %s's leader: %w", like, err)
	}
	li := lst.CachedInfo()
	if li.Config.Replicas <= 1 || li.Cluster == nil || li.Cluster.Leader == "" {
		return nil
	}
	if err := moveLeader(ctx, j, scratch, li.Cluster.Leader); err != nil {
		return fmt.Errorf("%w (the leader of %s)", err, like)
	}
	return nil
}

// moveLeader asks stream's leader to step down in favour of server want until want
// leads it.
func moveLeader(ctx context.Context, j js.JetStream, stream, want string) error {
	body, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
	if err != nil {
		return err
	}
	subject := apiPrefix(j.Options()) + "STREAM.LEADER.STEPDOWN." + stream
	for range leadAttempts {
		now, err := leaderOf(ctx, j, stream, "")
		if err != nil {
			return err
		}
		if now == want {
			return nil
		}
		m, err := j.Conn().RequestWithContext(ctx, subject, body)
		if err != nil {
			return fmt.Errorf("bench: move the leader of %s to %s: %w", stream, want, err)
		}
		var resp struct {
			Error *js.APIError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Error != nil {
			return fmt.Errorf("bench: move the leader of %s to %s: %v%v", stream, want, resp.Error, err)
		}
		wctx, cancel := context.WithTimeout(ctx, leadWait)
		_, err = leaderOf(wctx, j, stream, now)
		cancel()
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("bench: %s's leader is not %s after %d step-downs: the cluster does not honour a preferred leader", stream, want, leadAttempts)
}

// leaderOf is the leader of stream once it is one other than not, asking every
// 20 ms while the election runs. A stream without a leader answers no info request,
// so each ask has a short bound of its own.
func leaderOf(ctx context.Context, j js.JetStream, stream, not string) (string, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, infoWait)
		st, err := j.Stream(actx, stream)
		cancel()
		if err == nil && st.CachedInfo().Cluster != nil {
			if l := st.CachedInfo().Cluster.Leader; l != "" && l != not {
				return l, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("bench: wait for a new leader of %s: %w (last: %v)", stream, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// apiPrefix is the subject prefix of o's JetStream API requests: its domain's, its
// own, or the default.
func apiPrefix(o js.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	default:
		return js.DefaultAPIPrefix
	}
}
