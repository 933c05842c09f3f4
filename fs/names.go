package fs

import (
	"fmt"
	"strings"

	"github.com/memfs/memfs/store"
)

// errTooDeep is why a name that is not long is refused with ENAMETOOLONG
// (the closest errno): its path would be more than 20 levels deep.
var errTooDeep = fmt.Errorf("a memory path has at most %d levels", store.MaxPathSegments)

// MaxNameBytes is the longest name of one file or directory.
const MaxNameBytes = 255

// MarkerName is the read-only marker file at the root of every mount.
const MarkerName = ".anthropic-memory-store"

// CheckName is checkName for another local side (a directory on disk):
// the store path of name under parent, or why it can't be a memory's.
func CheckName(parent, name string, dir bool) (string, error) { return checkName(parent, name, dir) }

// MarkerContent is what the marker file of storeID's mount holds.
func MarkerContent(storeID string) []byte { return []byte("version 1\n" + storeID) }

// checkName validates a new name at depth (the number of segments of the
// resulting path) under a parent whose store path is parent. dir says the
// new entry is a directory (which must leave room for a file below it).
func checkName(parent, name string, dir bool) (string, error) {
	if len(name) > MaxNameBytes {
		return "", fmt.Errorf("%w: %d bytes", ErrNameTooLong, len(name))
	}
	p := parent + "/" + name
	if parent == "/" {
		p = "/" + name
	}
	if len(p) > store.MaxPathBytes {
		return "", fmt.Errorf("%w: path %d bytes", ErrNameTooLong, len(p))
	}
	depth := strings.Count(p, "/")
	if depth > store.MaxPathSegments || (dir && depth >= store.MaxPathSegments) {
		return "", fmt.Errorf("%w: %w", ErrNameTooLong, errTooDeep)
	}
	if name == "" || strings.Contains(name, "/") {
		return "", ErrInvalidName
	}
	if err := store.ValidatePath(p); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidName, err)
	}
	return p, nil
}
