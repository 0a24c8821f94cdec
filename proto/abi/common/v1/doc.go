// Package commonv1 is the Go code generated from abi/common/v1/common.proto: the envelope of every call: CallContext on requests, CallError inside replies.
// Do not edit the generated file; change the .proto and run go generate ./proto.
package commonv1
