package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// Check is Load for `abi-engine config check`: it also checks the files the
// configuration names, which Load leaves to the engine's start (an engine started
// with a credentials file that cannot be read fails to connect, exit 1), and reports
// their problems with every other one: nats.credentials must be a regular file this
// process can read, and so must every file of nats.tls, nats.nkey_seed_file, nats.token_file
// and nats.password_file, each parsed as the engine would. The user JWT of
// nats.credentials and the client certificate of nats.tls must be valid now.
func Check(path string, env func(string) string, overrides ...Override) (*Config, error) {
	data, path, err := read(path)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return parse(data, path, env, overrides, func(c *Config) []Issue { return c.fileIssues(now) })
}

const keyCredentials = "nats.credentials"

// fileIssues checks that every file the configuration names can be read and parsed,
// and that the credentials in them are valid at now.
func (c *Config) fileIssues(now time.Time) []Issue {
	var issues []Issue
	if p := c.NATS.Credentials; p != "" {
		if err := checkCreds(p, now); err != nil {
			issues = append(issues, c.issue(keyCredentials, strconv.Quote(p), "must be a NATS .creds file (a user JWT and its nkey seed) this process can read: "+err.Error()))
		}
	}
	return append(issues, c.authFileIssues(now)...)
}

// readable opens path and closes it again, after making sure it is a regular file
// (opening a named pipe would block).
func readable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("it is %s, %w", kindOf(fi.Mode()), ErrNotRegular)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// MaxFileSize caps the configuration file. A configuration is a few hundred bytes; a
// file far larger is a mistake (--config /dev/zero, a log file), and reading it whole
// would take the memory of the process.
const MaxFileSize = 1 << 20

// ErrNotRegular is returned (wrapped) for a configuration path that is not a regular
// file: a directory, a device such as /dev/zero, a named pipe (which would block the
// read until something writes to it), a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped) for a configuration file above MaxFileSize.
var ErrTooLarge = errors.New("larger than the configuration file cap")

// read returns the content of the file at path, or of FileName when path is empty, and
// the path it read; nil and "" when path is empty and FileName does not exist.
func read(path string) ([]byte, string, error) {
	if path != "" {
		data, err := readFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("reading configuration file %s (given with --config): %w", path, err)
		}
		return data, path, nil
	}
	data, err := readFile(FileName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading configuration file %s in the working directory: %w", FileName, err)
	}
	return data, FileName, nil
}

// readFile reads a regular file of at most MaxFileSize bytes. The kind of file is
// checked before it is opened, since opening a named pipe blocks, and again on the open
// file, which may not be the one checked.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regularAndSmall(fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regularAndSmall(fi); err != nil {
		return nil, err
	}
	// The file may grow between the stat and the read.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("it grew to more than %d bytes while being read: %w of %d bytes", MaxFileSize, ErrTooLarge, MaxFileSize)
	}
	return data, nil
}

func regularAndSmall(fi fs.FileInfo) error {
	m := fi.Mode()
	if !m.IsRegular() {
		return fmt.Errorf("it is %s, %w", kindOf(m), ErrNotRegular)
	}
	if fi.Size() > MaxFileSize {
		return fmt.Errorf("it is %d bytes, %w of %d bytes", fi.Size(), ErrTooLarge, MaxFileSize)
	}
	return nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (mode " + m.String() + ")"
}
