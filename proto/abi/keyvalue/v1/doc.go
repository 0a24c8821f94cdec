// Package keyvaluev1 is the Go code generated from abi/keyvalue/v1/keyvalue.proto: the keyvalue service's messages.
// Do not edit the generated file; change the .proto and run go generate ./proto.
package keyvaluev1
