package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// This file is the lock the embedded broker holds on its store directory. nats-server
// takes none: two of them on one directory (two engines started in one working
// directory) write the same JetStream files and lose acknowledged writes. The lock is
// an flock(2) (LockFileEx on Windows) on a file in the directory, taken before the
// nats-server starts and held while it runs; the operating system lets it go when the
// process ends, however it ends, so a killed engine leaves no stale lock behind. The
// file also says who holds it, for the engine that finds it taken.

// LockFile is the name of the lock file in a store directory.
const LockFile = "abi-engine.lock"

// ErrStoreLocked is a store directory whose lock another broker holds.
var ErrStoreLocked = errors.New("the store directory is in use by another embedded broker")

// StoreHolder is what the lock file says of the process that holds it.
type StoreHolder struct {
	PID      int       `json:"pid"`
	Host     string    `json:"host,omitempty"`
	Instance string    `json:"instance_id,omitempty"`
	URL      string    `json:"url,omitempty"` // the broker's client URL, once it accepts connections
	Since    time.Time `json:"since"`
}

func (h StoreHolder) String() string {
	parts := []string{fmt.Sprintf("pid %d", h.PID)}
	if h.Host != "" {
		parts = append(parts, "on "+h.Host)
	}
	if h.Instance != "" {
		parts = append(parts, "instance "+h.Instance)
	}
	if h.URL != "" {
		parts = append(parts, "broker "+h.URL)
	}
	return strings.Join(parts, ", ")
}

// StoreLockedError is a store directory whose lock is taken: the lock file and, when
// the file could be read, its holder.
type StoreLockedError struct {
	Path   string
	Holder *StoreHolder // nil when the lock file did not say
}

func (e *StoreLockedError) Error() string {
	who := "a holder the file does not name"
	if e.Holder != nil {
		who = e.Holder.String()
	}
	return fmt.Sprintf("%s: %s is locked by %s; every engine with its own embedded broker needs a store directory of its own (nats.embedded.store_dir), or use that engine's broker (nats.url)", ErrStoreLocked, e.Path, who)
}

func (e *StoreLockedError) Is(target error) bool { return target == ErrStoreLocked }

// StoreLock is the lock of one store directory, held until Unlock.
type StoreLock struct {
	path string
	f    *os.File
	me   StoreHolder
}

// LockStore takes the lock of dir, creating dir when it does not exist. A lock held by
// another process (or another StoreLock of this one) is a *StoreLockedError; nothing
// in dir is written then.
func LockStore(dir, instance string) (*StoreLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("supervisor: store directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("supervisor: lock of the store directory: %w", err)
	}
	if err := lockFile(f); err != nil {
		defer f.Close()
		if errors.Is(err, errLockHeld) {
			return nil, &StoreLockedError{Path: path, Holder: readHolder(f)}
		}
		return nil, fmt.Errorf("supervisor: lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	l := &StoreLock{path: path, f: f, me: StoreHolder{PID: os.Getpid(), Host: host, Instance: instance, Since: time.Now().UTC()}}
	if err := l.write(); err != nil {
		_ = l.Unlock()
		return nil, err
	}
	return l, nil
}

// Path is the lock file.
func (l *StoreLock) Path() string { return l.path }

// SetURL records the broker's client URL in the lock file, so an engine that finds the
// lock taken reaches the broker behind it (a broker on a random port included).
func (l *StoreLock) SetURL(url string) error {
	l.me.URL = url
	return l.write()
}

func (l *StoreLock) write() error {
	b, err := json.Marshal(l.me)
	if err != nil {
		return err
	}
	// Written over the old record, then cut to its length, never emptied first: a
	// reader sees one record or the other (the record only grows, with the URL).
	b = append(b, '\n')
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("supervisor: write %s: %w", l.path, err)
	}
	if err := l.f.Truncate(int64(len(b))); err != nil {
		return fmt.Errorf("supervisor: write %s: %w", l.path, err)
	}
	return nil
}

// Unlock lets the lock go. The file stays: removing it would race with a process that
// has opened it and waits to lock it.
func (l *StoreLock) Unlock() error {
	if err := unlockFile(l.f); err != nil {
		_ = l.f.Close()
		return fmt.Errorf("supervisor: unlock %s: %w", l.path, err)
	}
	return l.f.Close()
}

// readHolder reads the holder a lock file names; nil when it names none (the holder
// is between its lock and its first write, or the file is not ours).
func readHolder(f *os.File) *StoreHolder {
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, 1<<16), 1<<16))
	if err != nil {
		return nil
	}
	var h StoreHolder
	if json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}

// ReadStoreHolder reads who holds the lock of dir, without taking it; nil when the
// file does not name a holder.
func ReadStoreHolder(dir string) *StoreHolder {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	return readHolder(f)
}
