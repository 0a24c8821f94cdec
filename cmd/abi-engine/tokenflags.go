package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/servicetoken"
)

// tokenFlags are the service token flag of the client commands (call, bench): the
// token's caller. The secret is the connection's (--jwt-secret-file, connFlags).
type tokenFlags struct {
	caller string
}

func (f *tokenFlags) add(cmd *cobra.Command, caller string) {
	cmd.Flags().StringVar(&f.caller, "caller", caller, "the service tokens' caller (their sub)")
}

// options are the client options that sign a token on every call with the secret of
// b (--jwt-secret-file, else ABI_JWT_SECRET_FILE, else nats.jwt_secret_file), none
// without one. An unreadable secret is a usage error naming the flag.
func (f *tokenFlags) options(b brokerSettings) ([]client.Option, error) {
	file := b.JWTSecretFile
	if file == "" {
		return nil, nil
	}
	secret, err := servicetoken.ReadSecretFile(file)
	if err != nil {
		return nil, usageError(&flagError{fmt.Errorf("--jwt-secret-file: %w", err)})
	}
	return []client.Option{client.WithServiceToken(secret, f.caller)}, nil
}
