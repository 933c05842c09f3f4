package statedir

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

func TestPrepareCreatesPrivateDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "state")
	if err := Prepare(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Dir(dir)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, mode %v, want 0700", p, err, fi.Mode().Perm())
		}
	}
}

// Group and other bits are removed from the state dir and its subdirs,
// with one warning for them all.
func TestPrepareClosesLooseDirs(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{dir, filepath.Join(dir, "stores"), filepath.Join(dir, "run")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o775); err != nil {
			t.Fatal(err)
		}
	}
	log, hook := logtest.NewNullLogger()
	if err := Prepare(dir, log); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "stores"), filepath.Join(dir, "run")} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: mode %v after Prepare, want 0700", p, fi.Mode().Perm())
		}
	}
	if n := len(hook.AllEntries()); n != 1 || hook.LastEntry().Level != logrus.WarnLevel {
		t.Fatalf("%d log entries, want one warning: %+v", n, hook.AllEntries())
	}
	hook.Reset()
	if err := Prepare(dir, log); err != nil || len(hook.AllEntries()) != 0 {
		t.Fatalf("second Prepare: %v, %d log entries", err, len(hook.AllEntries()))
	}
}

func TestPrepareRefusesAnotherUsersDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	for _, sub := range []string{"", "stores"} {
		dir := t.TempDir()
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		err := Prepare(dir, nil)
		var fe *ForeignError
		if !errors.As(err, &fe) || fe.Path != p || fe.UID != 65534 || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("Prepare with %s owned by 65534: %v", p, err)
		}
	}
}

// The identity and key are made once, 0600, and read back the same by
// every later call, also by calls racing to make them.
func TestLoadKeysCreatesOnce(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	got := make([]Keys, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], errs[i] = LoadKeys(dir) }()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i].Identity != got[0].Identity || !bytes.Equal(got[i].Key, got[0].Key) {
			t.Fatal("racing LoadKeys disagree")
		}
	}
	if len(got[0].Key) != KeyLen || len(got[0].Identity) != 32 {
		t.Fatalf("keys %+v", got[0])
	}
	for _, f := range []string{IdentityFile, KeyFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", f, err, fi.Mode().Perm())
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(ents) != 0 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

// A short, open or foreign key is an error, never replaced by a new one.
func TestLoadKeysNeverReplacesADamagedKey(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadKeys(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, KeyFile)
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("LoadKeys with a short key: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "short" {
		t.Fatal("the short key was replaced")
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, KeyLen), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir); err == nil || !strings.Contains(err.Error(), "other users") {
		t.Fatalf("LoadKeys with a readable key: %v", err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir); err == nil {
		t.Fatal("LoadKeys with an empty key worked")
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatal("the empty key was replaced")
	}
}
