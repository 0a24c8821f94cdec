package sessions

// The service token (header Nats-Auth-Token) of a transfer exchange, and the caller it
// names: a session belongs to the caller that opened it (or whose reply was parked),
// as in the Python engine, and no other caller may touch it.

import (
	"github.com/abi-engine/engine/protocol"
)

// TokenVerifier checks a service token and returns its caller (the JWT's `sub`);
// servicetoken.Verifier is one. It must be safe for concurrent use.
type TokenVerifier interface {
	Verify(token string) (caller string, err error)
}

// Texts of the refusals; the first two are the Python engine's own.
const (
	invalidToken   = "Invalid service token"
	otherCaller    = "Transfer belongs to another caller"
	noSecretToken  = "this engine has no nats.jwt_secret_file, so it cannot verify service tokens and refuses protobuf transfers; set the account's HS256 secret there"
	parkedBadToken = "the reply is above the broker's max payload and could not be parked: the request's service token is not valid; the operation may already have completed, do not replay it automatically"
)

// authenticate checks the token of c and records its caller. With a verifier, every
// exchange of either codec must carry a valid token (as every call to a primary must);
// without one, a JSON exchange needs none and belongs to nobody, and a protobuf one is
// refused, naming the missing setting (the Python clients always send a token, which
// this engine could not check).
func (h *TransferHost) authenticate(c *call) error {
	if h.cfg.Tokens == nil {
		if c.codec == protocol.JSON {
			return nil
		}
		if h.cfg.OnNoTokens != nil {
			h.cfg.OnNoTokens()
		}
		return &protocol.Error{Code: protocol.Unauthenticated, Message: noSecretToken}
	}
	caller, err := h.cfg.Tokens.Verify(c.msg.Header.Get(protocol.HeaderAuthToken))
	if err != nil {
		return &protocol.Error{Code: protocol.Unauthenticated, Message: invalidToken}
	}
	c.caller = caller
	return nil
}

// belongs refuses call c on session e when it comes from another caller, or in the
// other codec: every exchange of a session is its opener's, in its opener's codec.
func belongs(e *entry, c *call) error {
	switch {
	case e.caller != c.caller:
		return &protocol.Error{Code: protocol.PermissionDenied, Message: otherCaller}
	case e.codec != c.codec:
		return protocol.Errorf(protocol.InvalidArgument, "transfer session %s speaks %s and this %s request is %s: every exchange of a session is in the codec of its open",
			e.id, e.codec, c.op, c.codec)
	}
	return nil
}

// Auth is the token check of a host (TransferConfig.Tokens and OnNoTokens), to pass
// where the host's config is built elsewhere (objectstorage.NewTransferHost).
type Auth struct {
	Tokens     TokenVerifier
	OnNoTokens func()
}

// Apply sets cfg's token check.
func (a Auth) Apply(cfg *TransferConfig) {
	cfg.Tokens, cfg.OnNoTokens = a.Tokens, a.OnNoTokens
}

// ConfigOption changes a TransferConfig built by another package: Limits and Auth are
// ones.
type ConfigOption interface {
	Apply(cfg *TransferConfig)
}
