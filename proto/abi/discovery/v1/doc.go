// Package discoveryv1 is the Go code generated from abi/discovery/v1/discovery.proto: the discovery registry's requests, replies and stored RegistryState.
// Do not edit the generated file; change the .proto and run go generate ./proto.
package discoveryv1
