package jsepoch

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/internal/epoch"
	"github.com/abi-engine/engine/internal/jserr"
	"github.com/abi-engine/engine/protocol"
)

// Fence is a JetStream backend's side of the epoch: the record in its bucket and the
// record its writes carry. Safe for concurrent use.
type Fence struct {
	record   *Record
	held     epoch.Held
	where    string   // "JetStream bucket ABI_KV"
	inFlight inFlight // the shards its writes are in flight on (claims.go)
}

// NewFence returns the fence of a backend on record; where names the bucket in errors.
func NewFence(record *Record, where string) *Fence {
	return &Fence{record: record, where: where}
}

// Adopt adopts epoch n (epoch.Held.Adopt).
func (f *Fence) Adopt(ctx context.Context, n uint64) error {
	return f.held.Adopt(ctx, f.record, f.where, n)
}

// Restore adopts the held epoch again when the bucket lost its record
// (epoch.Held.Restore).
func (f *Fence) Restore(ctx context.Context) (bool, error) {
	return f.held.Restore(ctx, f.record, f.where)
}

// Held is the record the next write carries.
func (f *Fence) Held() epoch.Record { return f.held.Load() }

// Write sends a write under the held record and reads the server's answer. sendTok builds
// its messages afresh on each call and puts the epoch check (Carry, CarryAs) on one of
// them; the token's shard is claimed for the write until Write returns (claims.go).
// what names the write in errors ("keyvalue set \"k\""), built only for one; otherwise
// maps an error other than a refusal by an expectation (the backend's writeError).
//
// A write the server holds back (undecided) while this backend adopts an epoch waits
// for the adoption and goes out again under the new record (epoch.Held.AwaitAdoption).
// A write refused for the epoch is sent once more when this backend's own record moved
// on meanwhile (epoch.Resend); otherwise it is answered UNAVAILABLE, retryable (nothing
// was stored), matching the *epoch.StaleError (a newer epoch: fenced) or
// *epoch.LostError (the bucket lost its record) that says why. conflict reports a
// refusal with the epoch current, which only a write with a second expectation can
// meet: that one failed.
func (f *Fence) Write(ctx context.Context, what func() string, sendTok func(tok Token) error, otherwise func(error) error) (conflict bool, err error) {
	c := claim{set: &f.inFlight}
	defer c.release()
	resent := false
	for {
		tok := Token{Record: f.held.Load(), claim: &c}
		err := send(ctx, func() error { return sendTok(tok) }, func() bool { return f.held.AwaitAdoption(tok.Record) })
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, errMovedOn):
			continue // held back during this backend's adoption: out again under its record
		case !jserr.IsConflict(err):
			return false, otherwise(err)
		}
		verdict, jerr := f.held.Judge(ctx, f.record, f.where, tok.Record)
		switch verdict {
		case epoch.Current:
			return true, nil
		case epoch.Resend:
			if !resent {
				resent = true
				continue
			}
			return false, protocol.Refused("%s: %s refused the write twice while this engine's epoch moved on, so it stored nothing: %v", what(), f.where, err)
		case epoch.Stale, epoch.Lost:
			return false, epoch.Refused(protocol.Refused("%s: refused by its epoch, so it stored nothing: %v", what(), jerr), jerr)
		}
		if errors.Is(jerr, context.Canceled) || errors.Is(jerr, context.DeadlineExceeded) {
			return false, jerr
		}
		return false, protocol.Refused("%s: %s refused the write (%v), so it stored nothing; its epoch record could not be read: %v", what(), f.where, err, jerr)
	}
}

// Carry puts the check of tok on m: the one place a JetStream backend attaches its
// token to a write.
func (f *Fence) Carry(m *nats.Msg, tok Token) { f.CarryAs(m, tok, m.Subject) }

// CarryAs puts the check of tok on m for a write on subject (Record.CheckAs), so
// writes to different keys whose checks ride on one subject are still judged in
// parallel; with a token of Write, on the shard it claimed.
func (f *Fence) CarryAs(m *nats.Msg, tok Token, subject string) {
	f.record.checkClaimed(m, tok.Record, subject, tok.claim)
}

// Record is the bucket's epoch record the fence adopts in.
func (f *Fence) Record() *Record { return f.record }
