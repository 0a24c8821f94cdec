//go:build windows

package supervisor

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// errLockHeld is a lock another open file holds.
var errLockHeld = errors.New("lock held")

// lockRange is the byte range locked: one byte far past the holder's record, since
// Windows refuses reads of a locked range and the record must stay readable.
const lockRange = 1 << 40

// lockFile takes an exclusive lock on f without waiting.
func lockFile(f *os.File) error {
	ol := windows.Overlapped{Offset: lockRange & 0xffffffff, OffsetHigh: lockRange >> 32}
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errLockHeld
	}
	return err
}

func unlockFile(f *os.File) error {
	ol := windows.Overlapped{Offset: lockRange & 0xffffffff, OffsetHigh: lockRange >> 32}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
