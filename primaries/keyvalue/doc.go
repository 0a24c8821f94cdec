// Package keyvalue is the keyvalue kernel service (abi.svc.keyvalue.v1.*): the Store
// port every backend implements, the input rules every implementation enforces (keys
// are non-empty UTF-8 of at most MaxKeyBytes bytes, TTLs are not negative), and
// Service, which maps the wire operations of docs/design.md §4.3 onto a Store for a
// primaries.Primary.
//
// Backends live in sub-packages (memory, bbolt, jetstream, postgres); kvtest is the
// contract every backend and the client SDK pass.
package keyvalue
