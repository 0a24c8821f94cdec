package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/abi-engine/engine/client"
	"github.com/abi-engine/engine/internal/servicetoken"
)

// tokenFlags are the service token flags of the client commands (call, bench): the
// secret's file and the token's caller.
type tokenFlags struct {
	secretFile, caller string
}

func (f *tokenFlags) add(cmd *cobra.Command, caller string) {
	cmd.Flags().StringVar(&f.secretFile, "jwt-secret-file", "", "file holding the HS256 secret to sign service tokens with (default: ABI_JWT_SECRET_FILE, else nats.jwt_secret_file of abi-engine.yaml; none: no token)")
	cmd.Flags().StringVar(&f.caller, "caller", caller, "the service tokens' caller (their sub)")
}

// options are the client options that sign a token on every call: with the flag's
// secret, else the configuration's (b), else none. An unreadable secret is a usage
// error naming the flag.
func (f *tokenFlags) options(cmd *cobra.Command, b brokerSettings) ([]client.Option, error) {
	file := f.secretFile
	if !cmd.Flags().Changed("jwt-secret-file") {
		file = b.JWTSecretFile
	}
	if file == "" {
		return nil, nil
	}
	secret, err := servicetoken.ReadSecretFile(file)
	if err != nil {
		return nil, usageError(&flagError{fmt.Errorf("--jwt-secret-file: %w", err)})
	}
	return []client.Option{client.WithServiceToken(secret, f.caller)}, nil
}
