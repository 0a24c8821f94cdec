// Package objectstorage is the object_storage kernel service
// (abi.svc.object_storage.v1.*): the Store port every backend implements, the naming
// rules every implementation enforces (CheckPrefix, CheckKey), Service, which maps the
// wire operations of docs/design.md §4.3 onto a Store for a primaries.Primary, and Transfers,
// the "put" and "get" transfer operations that carry objects larger than one message
// through a sessions.TransferHost on abi.svc.object_storage.v1.transfer
// (NewTransferHost builds that host).
//
// An object is named by a prefix and a key. The prefix is a path of segments separated
// by "/" (empty: the top level); the key is one segment. ListObjects(prefix) lists the
// keys of the objects directly under prefix, sorted.
//
// Backends live in sub-packages (memory, fs, jetstream); objtest is the contract every
// backend and the client SDK pass.
package objectstorage
