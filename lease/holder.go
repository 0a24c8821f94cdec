package lease

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Holder describes the engine that holds (or wants) the lease. It is the lease value,
// a JSON object with exactly these six snake_case keys, compatible with the Python
// engines of the same decision.
type Holder struct {
	InstanceID string `json:"instance_id"` // 32 lowercase hex: the engine's instance id
	Host       string `json:"host"`
	PID        int    `json:"pid"`
	Version    string `json:"version"`
	RolloutID  string `json:"rollout_id"` // empty: none
	StartedAt  string `json:"started_at"` // UTC, RFC 3339, seconds
}

// ThisProcess describes the running process as a holder.
func ThisProcess(instanceID, version, rolloutID string, now time.Time) Holder {
	host, err := os.Hostname()
	if err != nil {
		host = ""
	}
	return Holder{
		InstanceID: instanceID,
		Host:       host,
		PID:        os.Getpid(),
		Version:    version,
		RolloutID:  rolloutID,
		StartedAt:  now.UTC().Truncate(time.Second).Format(time.RFC3339),
	}
}

// Encode is the lease value for h.
func (h Holder) Encode() []byte {
	b, err := json.Marshal(h)
	if err != nil {
		// A struct of strings and an int always marshals.
		panic(fmt.Sprintf("lease: encode holder: %v", err))
	}
	return b
}

// DecodeHolder reads a lease value. It never fails: a value that is not a JSON object
// reads as an unknown holder (every field empty), a field of the wrong type reads as
// empty, so a foreign value in the key never stops a contender.
func DecodeHolder(b []byte) Holder {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Holder{}
	}
	str := func(k string) string {
		var s string
		if json.Unmarshal(raw[k], &s) != nil {
			return ""
		}
		return s
	}
	var pid int
	if json.Unmarshal(raw["pid"], &pid) != nil {
		var f float64
		if json.Unmarshal(raw["pid"], &f) == nil && f == float64(int(f)) {
			pid = int(f)
		} else {
			pid = 0
		}
	}
	return Holder{
		InstanceID: str("instance_id"),
		Host:       str("host"),
		PID:        pid,
		Version:    str("version"),
		RolloutID:  str("rollout_id"),
		StartedAt:  str("started_at"),
	}
}

// Known reports whether h names an engine (it has an instance id).
func (h Holder) Known() bool { return h.InstanceID != "" }

// String is the one-line description used in errors and logs:
// "<instance> on <host> (pid <pid>, version <version>, rollout <rollout>, since <started_at>)".
func (h Holder) String() string {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	return fmt.Sprintf("%s on %s (pid %d, version %s, rollout %s, since %s)",
		or(h.InstanceID, "unknown"), or(h.Host, "unknown host"), h.PID,
		or(h.Version, "unknown"), or(h.RolloutID, "none"), or(h.StartedAt, "unknown"))
}
