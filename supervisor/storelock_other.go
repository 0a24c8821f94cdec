//go:build !unix && !windows

package supervisor

import (
	"errors"
	"os"
)

// errLockHeld is a lock another open file holds.
var errLockHeld = errors.New("lock held")

// lockFile has no lock to take on a system without flock or LockFileEx: the store
// directory is not protected there.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
