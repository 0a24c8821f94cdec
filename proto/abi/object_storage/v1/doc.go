// Package objectstoragev1 is the Go code generated from the .proto files of abi/object_storage/v1/ (objects, listings, metadata): the object_storage service's messages.
// Do not edit the generated files; change the .proto files and run go generate ./proto.
package objectstoragev1
