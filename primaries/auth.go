package primaries

// The service token of a call (header Nats-Auth-Token), checked before anything else
// of the call runs, as the Python engine checks it.

import (
	"github.com/nats-io/nats.go/micro"

	"github.com/abi-engine/engine/protocol"
)

// TokenVerifier checks a service token and returns its caller (the JWT's `sub`);
// servicetoken.Verifier is one. It must be safe for concurrent use.
type TokenVerifier interface {
	Verify(token string) (caller string, err error)
}

// Texts of the refusals. The first is the Python engine's own, which its clients know.
const (
	invalidToken = "missing or invalid auth token"
	noSecret     = "this engine has no nats.jwt_secret_file, so it cannot verify service tokens and refuses protobuf calls; set the account's HS256 secret there"
)

// authenticate refuses a call without a valid token (Config.Tokens), or a protobuf
// call to an engine that cannot verify tokens; nil lets it run, and caller is the
// token's sub ("" without Tokens). A JSON call to an engine without a secret pays
// nothing here.
func (p *Primary) authenticate(j job) (caller string, _ *protocol.Error) {
	if p.cfg.Tokens == nil {
		if j.pb == nil {
			return "", nil
		}
		if p.cfg.OnNoTokens != nil {
			p.cfg.OnNoTokens()
		}
		return "", &protocol.Error{Code: protocol.Unauthenticated, Message: noSecret}
	}
	token := micro.Headers(j.req.Headers()).Get(protocol.HeaderAuthToken)
	caller, err := p.cfg.Tokens.Verify(token)
	if err != nil {
		return "", &protocol.Error{Code: protocol.Unauthenticated, Message: invalidToken}
	}
	return caller, nil
}
