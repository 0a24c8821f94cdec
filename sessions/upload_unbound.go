package sessions

import "github.com/abi-engine/engine/protocol"

// Until transfer sessions are bound to their opener's token, every caller may take an
// upload. Replaced by the binding.
func (e *entry) boundTo(string) bool { return true }

const permissionDenied = protocol.Code("PERMISSION_DENIED")
