// Package transfertest is a minimal transfer client for the primaries' tests: it drives
// a transfer session (open, write, start, read, close) over NATS as protocol/transfer.go
// describes, so tests check the service side against the wire protocol rather than
// against the client SDK.
package transfertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/abi-engine/engine/protocol"
)

// timeout bounds each exchange.
const timeout = 10 * time.Second

// Client calls one transfer prefix.
type Client struct {
	NC     *nats.Conn
	Prefix string
}

// Call sends req to subject and decodes the reply into rep; an error reply is returned
// as its *protocol.Error.
func Call(nc *nats.Conn, subject string, header nats.Header, req, rep any) (*nats.Msg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	m, err := nc.RequestMsg(&nats.Msg{Subject: subject, Header: header, Data: body}, timeout)
	if err != nil {
		return nil, err
	}
	if m.Header.Get(protocol.HeaderErrorCode) != "" {
		var env protocol.Envelope
		if err := json.Unmarshal(m.Data, &env); err != nil || env.Error == nil {
			return m, fmt.Errorf("error reply without an envelope: %q", m.Data)
		}
		return m, env.Error
	}
	if rep != nil {
		if err := json.Unmarshal(m.Data, rep); err != nil {
			return m, fmt.Errorf("decode %q: %w", m.Data, err)
		}
	}
	return m, nil
}

func (c Client) session(id, op string, req, rep any) error {
	subject, err := protocol.TransferSessionSubject(c.Prefix, id, op)
	if err != nil {
		return err
	}
	_, err = Call(c.NC, subject, nil, req, rep)
	return err
}

// Open opens a session of operation with metadata.
func (c Client) Open(operation string, metadata any) (protocol.TransferOpenReply, error) {
	raw, err := json.Marshal(metadata)
	if err != nil {
		return protocol.TransferOpenReply{}, err
	}
	var rep protocol.TransferOpenReply
	_, err = Call(c.NC, protocol.TransferOpenSubject(c.Prefix), nil,
		protocol.TransferOpenRequest{Operation: operation, Metadata: raw}, &rep)
	return rep, err
}

// Upload writes data in chunks of at most chunk bytes.
func (c Client) Upload(id string, data []byte, chunk int) error {
	for seq := uint64(0); len(data) > 0; seq++ {
		n := min(chunk, len(data))
		if err := c.session(id, protocol.TransferWrite, protocol.TransferWriteRequest{ID: id, Sequence: seq, Data: data[:n]}, nil); err != nil {
			return fmt.Errorf("write %d: %w", seq, err)
		}
		data = data[n:]
	}
	return nil
}

// Start runs the session's operation.
func (c Client) Start(id string) (protocol.TransferStartReply, error) {
	var rep protocol.TransferStartReply
	err := c.session(id, protocol.TransferStart, protocol.TransferStartRequest{ID: id}, &rep)
	return rep, err
}

// ReadAll reads every chunk until done.
func (c Client) ReadAll(id string) ([]byte, error) {
	var out []byte
	for seq := uint64(0); ; seq++ {
		var rep protocol.TransferReadReply
		if err := c.session(id, protocol.TransferRead, protocol.TransferReadRequest{ID: id, Sequence: seq}, &rep); err != nil {
			return nil, fmt.Errorf("read %d: %w", seq, err)
		}
		if rep.Sequence != seq {
			return nil, fmt.Errorf("read %d answered sequence %d", seq, rep.Sequence)
		}
		out = append(out, rep.Data...)
		if rep.Done {
			return out, nil
		}
	}
}

// Close closes the session.
func (c Client) Close(id string) error {
	return c.session(id, protocol.TransferClose, protocol.TransferCloseRequest{ID: id}, nil)
}

// Put uploads data as operation with metadata and starts it; Get opens, starts and
// reads. Both close the session.
func (c Client) Put(operation string, metadata any, data []byte) error {
	open, err := c.Open(operation, metadata)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	err = c.Upload(open.ID, data, open.ChunkBytes)
	if err == nil {
		_, err = c.Start(open.ID)
	}
	return errors.Join(err, c.Close(open.ID))
}

// Get runs operation with metadata and reads its result.
func (c Client) Get(operation string, metadata any) ([]byte, error) {
	open, err := c.Open(operation, metadata)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	var out []byte
	if _, err = c.Start(open.ID); err == nil {
		out, err = c.ReadAll(open.ID)
	}
	return out, errors.Join(err, c.Close(open.ID))
}
