package node

import (
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/abi-engine/engine/internal/servicetoken"
	"github.com/abi-engine/engine/primaries"
)

// serviceTokens is what the primaries verify service tokens with
// (nats.jwt_secret_file), and what they call when a protobuf call finds none: a
// warning, logged once per serving period, that names the missing setting. The secret
// is read when the engine starts serving, so a rotated file takes effect at the next
// handover; an unreadable one keeps the engine from serving, naming the file only.
func (e *Engine) serviceTokens() (primaries.TokenVerifier, func(), error) {
	path := e.cfg.NATS.JWTSecretFile
	if path == "" {
		var once sync.Once
		return nil, func() {
			once.Do(func() {
				e.log.Warn("a protobuf call was refused UNAUTHENTICATED: nats.jwt_secret_file is not set, so this engine cannot verify service tokens; " +
					"set it to the account's HS256 secret to serve the Python clients")
			})
		}, nil
	}
	secret, err := servicetoken.ReadSecretFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: nats.jwt_secret_file: %w", err)
	}
	v, err := servicetoken.NewVerifier(secret, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: nats.jwt_secret_file %s: %w", path, err)
	}
	e.log.Info("service tokens required on every call", zap.String("jwt_secret_file", path))
	return v, nil, nil
}
