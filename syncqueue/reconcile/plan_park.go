package reconcile

import (
	"encoding/hex"
	"strings"
)

// ParkPrefix begins the path a memory is parked at for the length of one
// pass when the pass's moves form a cycle (docs/sync.md, "Cycles of
// moves"): /.memfs-moving-<memory id>-<random hex>, a name no file of a
// mount can hold by accident, unique per move.
const ParkPrefix = "/.memfs-moving-"

// BlockedMove is one change of a pass still refused for a path conflict
// after a round of retries.
type BlockedMove struct {
	Create bool   // a create: it has no memory to park
	Path   string // where the change wants the memory
	// StorePath is where the store holds the change's memory, as this
	// mount last agreed ("" when it does not know).
	StorePath string
}

// ChooseParked picks the blocked change whose memory to park to break a
// cycle of moves: the first (in the given order) that is not a create,
// whose memory's path in the store blocks another blocked change — the
// path itself, or a directory or file it collides with. ok is false when
// none does: the changes wait for the next pass.
func ChooseParked(blocked []BlockedMove) (i int, ok bool) {
	for i, y := range blocked {
		if y.Create || y.StorePath == "" {
			continue
		}
		for j, z := range blocked {
			if i != j && PathsCollide(y.StorePath, z.Path) {
				return i, true
			}
		}
	}
	return -1, false
}

// ParkPath is the temporary path of memory id for one pass; random is the
// caller's randomness (4 bytes make the name unique per move).
func ParkPath(id string, random []byte) string {
	return ParkPrefix + id + "-" + hex.EncodeToString(random)
}

// PathsCollide reports whether memories at a and b can't both exist: the
// same path, or one is a directory of the other.
func PathsCollide(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}
