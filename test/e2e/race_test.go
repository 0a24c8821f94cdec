//go:build race

package e2e

// raceDetector says the tests run with the race detector, which makes what a test does
// itself (not the engine processes it starts, built without it) several times slower.
const raceDetector = true
