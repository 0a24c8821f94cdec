package lease

// What the external tests (package lease_test, which drive a Machine against
// leasetest's stores) need of the package's unexported side. leasetest imports lease,
// so they cannot live in package lease; this file is compiled only into the tests.

// NewCheckedMachine is the internal tests' newMachine: the test fails if its machine
// ever made a move the transition table does not allow, or broke one of its
// invariants.
var NewCheckedMachine = newMachine
