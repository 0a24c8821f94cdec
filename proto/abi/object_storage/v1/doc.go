// Package objectstoragev1 is the Go code generated from abi/object_storage/v1/object_storage.proto: the object_storage service's messages.
// Do not edit the generated file; change the .proto and run go generate ./proto.
package objectstoragev1
