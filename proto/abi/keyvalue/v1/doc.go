// Package keyvaluev1 is the Go code generated from the .proto files of abi/keyvalue/v1/ (one per group of operations): the keyvalue service's messages.
// Do not edit the generated files; change the .proto files and run go generate ./proto.
package keyvaluev1
