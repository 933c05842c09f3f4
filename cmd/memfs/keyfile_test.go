package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const fileKey = "sk-memfs-admin-from-a-file-0123456789"

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		// Chmod, not WriteFile's mode: the umask would narrow that.
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write("target", fileKey+"\n", 0o600), link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		want string // the key, when it is accepted
		err  error  // else: errors.Is
		msg  []string
	}{
		{name: "0600 with a newline", path: write("good", fileKey+"\n", 0o600), want: fileKey},
		{name: "0400 without a newline", path: write("ro", fileKey, 0o400), want: fileKey},
		{name: "CRLF", path: write("crlf", fileKey+"\r\n", 0o600), want: fileKey},
		{name: "a symlink to a 0600 file", path: link, want: fileKey},
		{name: "0644", path: write("loose", fileKey+"\n", 0o644), err: errKeyFileLoose,
			msg: []string{"can be read by other users", "0644", "chmod 600 " + filepath.Join(dir, "loose")}},
		{name: "0640", path: write("group", fileKey+"\n", 0o640), err: errKeyFileLoose, msg: []string{"chmod 600"}},
		{name: "0620", path: write("groupw", fileKey+"\n", 0o620), err: errKeyFileLoose, msg: []string{"can be changed by other users", "chmod 600"}},
		{name: "empty", path: write("empty", "", 0o600), err: errKeyFileEmpty, msg: []string{"is empty"}},
		{name: "only a newline", path: write("newline", "\n", 0o600), err: errKeyFileEmpty},
		{name: "two lines", path: write("two", fileKey+"\nsecond\n", 0o600), err: errKeyFileMultiline},
		{name: "two newlines", path: write("blank", fileKey+"\n\n", 0o600), err: errKeyFileMultiline},
		{name: "a trailing space", path: write("space", fileKey+" \n", 0o600), err: errKeyFileMultiline},
		{name: "too large", path: write("large", strings.Repeat("k", maxKeyFileBytes+1), 0o600), err: errKeyFileTooLarge},
		{name: "missing", path: filepath.Join(dir, "missing"), err: os.ErrNotExist, msg: []string{"no such file"}},
		{name: "a directory", path: dir, err: errKeyFileNotRegular, msg: []string{"a directory"}},
		{name: "a named pipe", path: fifo, err: errKeyFileNotRegular, msg: []string{"a named pipe"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readKeyFile(tc.path)
			if tc.err == nil {
				if err != nil || got != tc.want {
					t.Fatalf("readKeyFile = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("readKeyFile = %q, %v; want an error that is %v", got, err, tc.err)
			}
			if got != "" {
				t.Errorf("readKeyFile returned %q with its error", got)
			}
			for _, m := range append(tc.msg, tc.path) {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if strings.Contains(err.Error(), fileKey) {
				t.Errorf("error %q shows the key", err)
			}
			if errors.As(err, new(usageError)) {
				t.Errorf("a bad key file is a usage error (exit 2); want exit 1")
			}
		})
	}
}

func TestKeyFlagResolve(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(fileKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte(fileKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	const flagKey, envKey, envKey2 = "key-from-the-flag", "key-from-env", "key-from-the-second-env"
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		want  string
		usage bool // want a usage error (exit 2)
		err   error
	}{
		{name: "nothing", want: ""},
		{name: "flag", args: []string{"--api-key", flagKey}, env: map[string]string{"MEMFS_API_KEY": envKey}, want: flagKey},
		{name: "file", args: []string{"--api-key-file", good}, want: fileKey},
		{name: "file beats env", args: []string{"--api-key-file", good}, env: map[string]string{"MEMFS_API_KEY": envKey}, want: fileKey},
		{name: "env", env: map[string]string{"MEMFS_API_KEY": envKey}, want: envKey},
		{name: "second env", env: map[string]string{"OTHER_KEY": envKey2}, want: envKey2},
		{name: "flag and file", args: []string{"--api-key", flagKey, "--api-key-file", good}, usage: true},
		{name: "loose file", args: []string{"--api-key-file", loose}, err: errKeyFileLoose},
		{name: "missing file", args: []string{"--api-key-file", filepath.Join(dir, "missing")}, err: os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			k := addKeyFlag(fs, "api-key", "an admin key", "MEMFS_API_KEY", "OTHER_KEY")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := k.resolve(func(n string) string { return tc.env[n] })
			switch {
			case tc.usage:
				if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "--api-key and --api-key-file") {
					t.Fatalf("resolve = %q, %v; want a usage error naming both flags", got, err)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), "--api-key-file: ") {
					t.Fatalf("resolve = %q, %v; want %v, naming --api-key-file", got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Fatalf("resolve = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestKeyFlagHelpHidesEnv: --help prints no key taken from the
// environment (a flag default read from the environment would be printed
// as "(default ...)").
func TestKeyFlagHelpHidesEnv(t *testing.T) {
	t.Setenv("MEMFS_API_KEY", fileKey)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	addKeyFlag(fs, "api-key", "an admin key", "MEMFS_API_KEY")
	fs.PrintDefaults()
	if strings.Contains(out.String(), fileKey) {
		t.Errorf("--help shows the key from MEMFS_API_KEY:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "-api-key-file") {
		t.Errorf("--help does not offer --api-key-file:\n%s", out.String())
	}
}
