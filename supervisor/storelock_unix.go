//go:build unix

package supervisor

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errLockHeld is a lock another open file holds.
var errLockHeld = errors.New("lock held")

// lockFile takes an exclusive flock on f without waiting. flock, not fcntl: an fcntl
// lock belongs to the process, so a second lock of the same file in this process would
// succeed; an flock belongs to the open file, so it refuses a second engine in one
// process as well as in another.
func lockFile(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLockHeld
	}
	return err
}

func unlockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
