package syncqueue

import (
	"path"
	"strings"
)

// ScratchPrefix begins the name of the temporary file the official SDK's
// write and edit tools (tools/agenttoolset, atomicWriteFile) create next to
// their target with os.CreateTemp(dir, ".agenttoolset-*"), write, close and
// then rename over the target.
//
// The rename is journaled as "delete the target, the new file at its path",
// which a pass folds into one update of the target's memory, as for any
// editor's atomic save (flusher.plan). But the close is journaled first, as a
// create at the temporary name, and a pass that runs between the close and the
// rename would upload that create: a memory at /.agenttoolset-123 in the
// store, then moved over the target while the target's delete waits its 30 s,
// so the target's memory id changes and other mounts see the temporary name.
//
// So a file at such a name is scratch: it exists on the mount only. A pass
// never uploads its create, status does not list it as pending, and it is
// not counted in what a mount leaves (exit status 3): nothing of it would
// ever be uploaded. Renamed to any other name, it is an ordinary create (or,
// over a file, the update above). A memory the store already holds at such a
// name is not scratch: it has an origin, and its changes go up as any other.
const ScratchPrefix = ".agenttoolset-"

// isScratch reports whether a store path names a scratch file.
func isScratch(p string) bool {
	return strings.HasPrefix(path.Base(p), ScratchPrefix)
}

// scratchCreate reports whether a pending change is the create of a scratch
// file: held on the mount, never uploaded.
func scratchCreate(origin, p string, deleted bool) bool {
	return origin == "" && !deleted && isScratch(p)
}
