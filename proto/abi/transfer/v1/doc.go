// Package transferv1 is the Go code generated from the .proto files of abi/transfer/v1/ (the session's ends, its data exchanges): the transfer session messages (objects larger than one message, the RPC overflow host).
// Do not edit the generated files; change the .proto files and run go generate ./proto.
package transferv1
