// Package pysdk runs the Python SDK its users run (naas-abi-sdk, naas-abi-proto from
// PyPI, pinned by hash in requirements.txt) against a real abi-engine process on a
// real broker, with pytest, from `go test`: the proof that abi-engine serves the
// clients of the system it implements, with their own bytes rather than ours.
//
// The test makes a virtual environment outside the work tree (the user cache
// directory, keyed by the requirements' hash, so later runs reuse it), installs the
// requirements with --require-hashes, builds abi-engine and starts it on loopback with
// a service token secret, its keyvalue store (a bbolt file) seeded with a value three
// times the broker's max payload, which only a parked reply can return, and runs
// test_sdk.py. The Python checks read the engine's /metrics to tell what the engine
// served: a transfer rather than the SDK's unary fallback, no session left open.
// test_discovery.py and test_modules.py use the SDK's discovery client and run real
// modules with its naas-abi-module. pytest's report is the Go test's output; its
// result is the Go test's result. The checks that need no engine at all, or an engine
// stopped and started again, are Go tests driving SDK processes
// (TestPythonSDKWhileNoEngineServes).
//
// Without Python 3.10 or later, or when the packages cannot be installed, the test
// skips and says why; with ABI_TEST_PYTHON_SDK=1 (set by .ci/run) it fails instead.
// ABI_TEST_PYTHON names the interpreter (default python3).
package pysdk
