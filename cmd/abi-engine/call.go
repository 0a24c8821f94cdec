package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/protocol"
	"github.com/spf13/cobra"
)

func (c *cli) callCommand() *cobra.Command {
	var conn connFlags
	var tokens tokenFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call SERVICE OPERATION [JSON | - | @FILE]",
		Short: "Call a kernel service and print its reply",
		Long: `call sends JSON (default {}) to abi.svc.SERVICE.v1.OPERATION, prints the reply body on
standard output and, on standard error, the engine instance that answered. A call that
reached no engine is resent for a few seconds, as the SDK does during a handover.
An error reply prints its code and message and exits 1.

When the engines require service tokens (nats.jwt_secret_file), call signs one with the
same secret: --jwt-secret-file, else ABI_JWT_SECRET_FILE, else nats.jwt_secret_file of
abi-engine.yaml; the token's caller (sub) is --caller.

The body is the JSON argument, or with - standard input, or with @FILE the file's
content (for a body over the 128 KiB an argument may hold). Bytes members (value,
content, data) are base64 strings: one that is not is refused naming it, before
anything is sent (exit 2).

Before it sends, call asks the engine that answers which operations the service has
($SRV.INFO.SERVICE): an operation or a service no engine offers is refused at once,
naming the valid ones (exit 2). The kernel services and their operations:

` + kernelHelp() + `
A reply too large for one message (a keyvalue get of a value near the broker's
max_payload) is asked for parked (header Abi-Overflow: 1) and read from the engine that
holds it, as the SDK does.

A call the broker refuses for want of a permission fails at once naming the subject:
nothing ran.`,
		Example: `  abi-engine call keyvalue set '{"key":"greeting","value":"aGVsbG8="}'
  abi-engine call keyvalue get '{"key":"greeting"}'
  abi-engine call keyvalue list_keys '{"prefix":"user:","limit":100}'
  abi-engine call keyvalue get_ttl '{"key":"greeting"}'
  abi-engine call object_storage list_objects_recursive '{"prefix":"papers"}'
  jq -n --arg v "$(base64 -w0 big.bin)" '{key:"big",value:$v}' | abi-engine call keyvalue set -
  abi-engine call keyvalue set @request.json`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, payload, err := callRequest(args, c.stdin)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("timeout") && timeout <= 0 {
				return usageError(&flagError{fmt.Errorf("--timeout %s: must be greater than 0", timeout)})
			}
			b, err := c.brokerFor(cmd, &conn)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("timeout") {
				timeout = b.Timeout
			}
			nc, err := connect(b, "abi-engine call")
			if err != nil {
				return err
			}
			defer nc.Close()
			signed, err := tokens.options(b)
			if err != nil {
				return err
			}
			opts := append([]client.Option{client.WithDefaultTimeout(timeout)}, signed...)
			t, err := client.NewTransport(nc, opts...)
			if err != nil {
				return usageError(&flagError{err})
			}
			watched, side, stop := whenDenied(cmd.Context(), nc)
			defer stop()
			if err := checkOperation(side, nc, args[0], args[1]); err != nil {
				return usageError(err)
			}
			ctx, cancel := context.WithTimeout(watched, timeout)
			defer cancel()
			// As the SDK calls: a reply too large for one message (a keyvalue get of a
			// value near the broker's max_payload) is parked by the engine and read
			// from it, instead of failing PAYLOAD_TOO_LARGE.
			reply, err := t.Call(ctx, args[0], args[1], payload)
			if d := denied(ctx); d != nil {
				return runtimeError(d)
			}
			if err != nil {
				return c.callFailed(err)
			}
			body := reply.Data
			if !bytes.HasSuffix(body, []byte("\n")) {
				body = append(body, '\n')
			}
			if _, err := c.stdout.Write(body); err != nil {
				return runtimeError(err)
			}
			fmt.Fprintf(c.stderr, "answered by engine %s\n", orUnknown(reply.Instance))
			return nil
		},
	}
	conn.add(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for the reply (default: nats.client_timeout_seconds, 10s unless set)")
	tokens.add(cmd, "abi-engine-call")
	return cmd
}

// callRequest checks the arguments of call: the subject's tokens and the JSON body.
func callRequest(args []string, stdin io.Reader) (subject string, payload []byte, err error) {
	service, op := args[0], args[1]
	if err := subjectToken("SERVICE", service, false); err != nil {
		return "", nil, usageError(err)
	}
	if err := subjectToken("OPERATION", op, true); err != nil {
		return "", nil, usageError(err)
	}
	payload = []byte("{}")
	if len(args) == 3 {
		var what string
		if payload, what, err = callBody(args[2], stdin); err != nil {
			return "", nil, usageError(err)
		}
		var v any
		if err := json.Unmarshal(payload, &v); err != nil {
			return "", nil, usageError(fmt.Errorf("%s is not valid JSON: %v", what, err))
		}
		if err := checkBytesMembers(payload); err != nil {
			return "", nil, usageError(err)
		}
	}
	return protocol.ServiceSubject(service, op), payload, nil
}

// subjectToken refuses what would make the subject something else than one operation
// of one service: wildcards, spaces, empty tokens, and a dot in the service name.
func subjectToken(what, s string, dots bool) error {
	bad := func(rule string) error { return fmt.Errorf("%s %q: %s", what, s, rule) }
	switch {
	case s == "":
		return bad("must not be empty")
	case strings.ContainsAny(s, " \t\r\n*>"):
		return bad("must not contain spaces or the wildcards * and >")
	case !dots && strings.Contains(s, "."):
		return bad("must not contain a dot")
	case dots && (strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..")):
		return bad("must not have an empty token")
	}
	return nil
}

// callFailed reports an error reply as its code and message, and a call that failed
// on the way with its cause.
func (c *cli) callFailed(err error) error {
	var ce *client.CallError
	if !errors.As(err, &ce) {
		return runtimeError(err)
	}
	if ce.Cause != nil {
		return runtimeError(fmt.Errorf("%s: %s: %s (%v)", ce.Subject, ce.Err.Code, ce.Err.Message, ce.Cause))
	}
	msg := fmt.Sprintf("%s: %s", ce.Err.Code, ce.Err.Message)
	if ce.Err.Retryable {
		msg += " (retryable)"
	}
	fmt.Fprintln(c.stderr, msg)
	fmt.Fprintf(c.stderr, "answered by engine %s\n", orUnknown(ce.Instance))
	return &exitError{Code: exitRuntime}
}
