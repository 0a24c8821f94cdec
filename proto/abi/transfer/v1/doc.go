// Package transferv1 is the Go code generated from abi/transfer/v1/transfer.proto: the transfer session messages (objects larger than one message, the RPC overflow host).
// Do not edit the generated file; change the .proto and run go generate ./proto.
package transferv1
