package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/memfs/memfs/store"
)

// checkMountPath checks one store's mount path before anything is mounted
// (worker.md step 4): a clean absolute path (no ..) under the memory
// root, with nothing at it. A resource without a mount path gets
// <root>/<slug>.
func checkMountPath(root string, r store.SessionResource) (string, error) {
	p := r.MountPath
	if p == "" {
		p = filepath.Join(root, store.Slug(r.Name, r.MemoryStoreID))
	}
	if !filepath.IsAbs(p) || strings.Contains("/"+p+"/", "/../") || filepath.Clean(p) != p {
		return "", fmt.Errorf("the mount path %q of memory store %s is not a clean absolute path", p, r.MemoryStoreID)
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("the mount path %q of memory store %s is outside the memory root %s", p, r.MemoryStoreID, root)
	}
	if _, err := os.Lstat(p); err == nil {
		return "", fmt.Errorf("something already exists at the memory store's path %s; it must not exist when the session starts (it was left as found)", p)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("memory store path %s: %w", p, err)
	}
	return p, nil
}

// ensureMemoryRoot creates the memory root if needed (its parent must
// exist) and checks this process can create directories in it.
func ensureMemoryRoot(root string) error {
	fix := fmt.Sprintf("the worker host must make this mount path writable: sudo mkdir -p %s && sudo chown \"$USER\" %s", root, root)
	parent := filepath.Dir(root)
	if _, err := os.Stat(parent); err != nil {
		return fmt.Errorf("cannot create the memory store's folder %s: its parent %s does not exist; %s", root, parent, fix)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("cannot create the memory store's folder %s: %v; %s", root, err, fix)
	}
	probe, err := os.MkdirTemp(root, ".memfs-probe-")
	if err != nil {
		return fmt.Errorf("cannot create the memory store's folder in %s: %v; %s", root, err, fix)
	}
	return os.Remove(probe)
}

func isRoot() bool { return os.Geteuid() == 0 }

// hasJournal reports whether a store has a journal directory in the state dir.
func hasJournal(stateDir, storeID string) bool {
	_, err := os.Stat(filepath.Join(stateDir, "stores", storeID, "journal"))
	return err == nil
}
