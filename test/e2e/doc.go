// Package e2e starts real abi-engine processes against a real broker and checks the
// promises a user sees: a rolling deploy without a failed call, a second engine refused
// with exit code 3, a takeover after SIGKILL, client engines that touch nothing, and a
// rollout with local storage refused before it touches the broker.
//
// TestMain builds the binary once; every test starts the processes it needs and stops
// them in its cleanup.
package e2e
