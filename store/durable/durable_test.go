package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	p := filepath.Join(dir, "key")
	if err := WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("read back %q, %v; want two", b, err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only the file (no temporary left)", len(ents))
	}
}

// TestCreateFileNeverReplaces: CreateFile writes a new file like
// WriteFile, but an existing one is left as it was, with os.ErrExist,
// and no temporary file stays behind.
func TestCreateFileNeverReplaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	p := filepath.Join(dir, "key")
	if err := CreateFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(p, []byte("two"), 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("CreateFile over an existing file: %v, want os.ErrExist", err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "one" {
		t.Fatalf("read back %q, %v; want one (not replaced)", b, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Fatalf("stat %v, %v; want 0600 with one link", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only the file (no temporary left)", len(ents))
	}
}
