package test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memfs/memfs/test/harness"
)

// Tests of how memfs stops and starts (issue 10, items 6–8).

// TestServeAddressInUse: memfs serve on an address already in use exits 1
// with a message naming it, before it creates anything: no data dir, no
// admin.key, no database.
func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	dataDir := filepath.Join(t.TempDir(), "data")
	out, errb, code := cvMemfs(t, nil, "serve", "--listen", addr, "--data-dir", dataDir)
	if code != 1 || !strings.Contains(errb, "listen on "+addr) || !strings.Contains(errb, "address already in use") {
		t.Errorf("memfs serve on a taken address: exit %d, want 1 naming %s:\n%s%s", code, addr, out, errb)
	}
	for _, f := range []string{dataDir, filepath.Join(dataDir, "admin.key"), filepath.Join(dataDir, "memfs.db")} {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after memfs serve failed to listen (%v): a taken port must leave nothing behind", f, err)
		}
	}
	// The same data dir serves once the address is free.
	s := harness.StartServe(t, harness.ServeOptions{DataDir: dataDir})
	if _, err := os.Stat(filepath.Join(s.DataDir, "memfs.db")); err != nil {
		t.Errorf("memfs serve on a free address: %v", err)
	}
}
