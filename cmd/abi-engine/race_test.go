//go:build race

package main

// raceBuild makes the process tests build the binary with -race too, so it reuses the
// packages the race-enabled test build compiled, and its races fail the test.
const raceBuild = true
