package main

// Keys on the command line are visible to every user of the host: ps and
// /proc/<pid>/cmdline are world-readable. So every flag that takes a key
// (--api-key, --admin-key, --environment-key, --replay-api-key) has a
// --NAME-file twin and an environment variable, and the help and
// docs/operating.md show only those. --NAME itself stays for scripts and tests that
// run alone on a machine.
//
// Which one is used: --NAME, else --NAME-file, else the first non-empty
// environment variable. --NAME and --NAME-file together are a usage error
// (exit 2): one of them would be silently ignored. A key file that can't be
// used (missing, not a regular file, open to group or others, empty, more
// than one line) is an error (exit 1) naming the flag, the file and the
// fix; the command does nothing else. memfs session --work-secret-file
// reads its file with the same rules (readKeyFile). The file's owner is
// not checked: mode 0600 already means only its owner (and root) can read
// it.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// maxKeyFileBytes bounds what a key file may hold: keys are well under
// 100 bytes, work secrets under 1 KiB; anything bigger is the wrong file.
const maxKeyFileBytes = 16 << 10

// Problems readKeyFile refuses a file for, for errors.Is.
var (
	errKeyFileLoose      = errors.New("key file open to other users")
	errKeyFileNotRegular = errors.New("key file not a regular file")
	errKeyFileEmpty      = errors.New("key file empty")
	errKeyFileMultiline  = errors.New("key file holds more than a key")
	errKeyFileTooLarge   = errors.New("key file too large")
)

// keyFileError is a key file readKeyFile refused: which file, which
// problem (one of the errKeyFile* above, or the open's error), and a
// message that says what to do.
type keyFileError struct {
	path    string
	problem error
	msg     string
}

func (e *keyFileError) Error() string { return "the key file " + e.path + " " + e.msg }
func (e *keyFileError) Unwrap() error { return e.problem }

// readKeyFile reads a key from path. The file must be a regular file (a
// symlink to one is fine) that neither group nor others can access (mode &
// 0o077 == 0): the key in it is as good as a password. One trailing
// newline ("\n" or "\r\n") is trimmed, as editors and echo add one; any
// other whitespace or control character is refused rather than guessed
// about, and so is an empty key.
func readKeyFile(path string) (string, error) {
	refuse := func(problem error, format string, args ...any) (string, error) {
		return "", &keyFileError{path: path, problem: problem, msg: fmt.Sprintf(format, args...)}
	}
	// O_NONBLOCK: opening a FIFO must not hang; for a regular file it
	// changes nothing. The checks use the opened file (fstat), so a file
	// swapped between check and read is still the file checked.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		err = unwrapPathError(err)
		return refuse(err, "can't be opened: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return refuse(err, "can't be read: %v", err)
	}
	if !fi.Mode().IsRegular() {
		return refuse(errKeyFileNotRegular, "is %s, not a regular file holding the key", fileKind(fi.Mode()))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		how := "changed"
		if perm&0o044 != 0 {
			how = "read"
		}
		return refuse(errKeyFileLoose, "can be %s by other users (mode %04o); make it private: chmod 600 %s", how, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return refuse(err, "can't be read: %v", err)
	}
	if len(b) > maxKeyFileBytes {
		return refuse(errKeyFileTooLarge, "is over %d bytes: it is not a key file", maxKeyFileBytes)
	}
	key := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if key == "" {
		return refuse(errKeyFileEmpty, "is empty: write the key into it")
	}
	if strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return refuse(errKeyFileMultiline, "holds more than one line, or spaces: it must hold only the key (one trailing newline is fine)")
	}
	return key, nil
}

// unwrapPathError drops the *PathError's own "open PATH:" prefix, since
// the message already names the file.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fileKind names a non-regular file type for an error message.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// keyFlag is one key-taking flag: --NAME, its --NAME-file twin, and the
// environment variables it falls back to.
type keyFlag struct {
	name  string   // "api-key"
	envs  []string // fallbacks, first non-empty wins
	value string   // --NAME
	file  string   // --NAME-file
}

// addKeyFlag adds --NAME and --NAME-file to fs. what describes the key
// ("an admin key of the store service"). The flags have no default: a
// default taken from the environment would be printed by --help.
func addKeyFlag(fs *flag.FlagSet, name, what string, envs ...string) *keyFlag {
	k := &keyFlag{name: name, envs: envs}
	env := ""
	if len(envs) > 0 {
		env = ", or env " + strings.Join(envs, ", ")
	}
	fs.StringVar(&k.value, name, "", what+"; visible to every user in ps: prefer --"+name+"-file"+env)
	fs.StringVar(&k.file, name+"-file", "", "a file (mode 0600, one line) holding "+what)
	return k
}

// resolve returns the key from --NAME, --NAME-file or the environment
// (getenv), "" when none gives one. Both flags together are a usage error.
func (k *keyFlag) resolve(getenv func(string) string) (string, error) {
	switch {
	case k.value != "" && k.file != "":
		return "", usagef("--%s and --%s-file both given: use one (the file keeps the key out of ps)", k.name, k.name)
	case k.value != "":
		return k.value, nil
	case k.file != "":
		key, err := readKeyFile(k.file)
		if err != nil {
			return "", fmt.Errorf("--%s-file: %w", k.name, err)
		}
		return key, nil
	}
	for _, n := range k.envs {
		if v := getenv(n); v != "" {
			return v, nil
		}
	}
	return "", nil
}

// sources names where the key can come from, for "is required" errors.
func (k *keyFlag) sources() string {
	s := "--" + k.name + "-file"
	for _, e := range k.envs {
		s += " or " + e
	}
	return s
}
