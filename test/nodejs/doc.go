// Package nodejs runs a second, independent implementation of the Python SDK's
// transport against a real abi-engine process: smoke.mjs, in JavaScript, with the NATS
// client nats.js (@nats-io/transport-node), protobufjs loading the repository's .proto
// files at run time and jsonwebtoken signing the service tokens. It runs cases a, b, e
// and f of the Python client contract (test/sdkemu runs all nine in Go), so the
// engine's bytes are checked by a protobuf implementation and a NATS client that share
// no code with it.
//
// The packages are pinned in package.json and package-lock.json and installed with
// `npm ci` in this directory (.ci/run does it). Without node, or without the
// packages, the test skips and says why; with ABI_TEST_NODE=1 (set by .ci/run once
// the install worked) it fails instead.
package nodejs
