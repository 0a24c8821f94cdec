// Package proto holds the protobuf contracts of the kernel services (the .proto files
// under abi/) and the Go code generated from them, committed so that building needs no
// generator. The messages are the wire format of the Python clients (naas-abi-sdk); the
// engine serves them beside its JSON protocol on the same subjects.
//
// To regenerate after changing a .proto file (protoc 3.21 or later and protoc-gen-go
// on PATH; see docs/protocol.md):
//
//	go generate ./proto
package proto

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative abi/common/v1/common.proto abi/keyvalue/v1/keyvalue.proto abi/object_storage/v1/object_storage.proto abi/transfer/v1/transfer.proto abi/discovery/v1/discovery.proto
