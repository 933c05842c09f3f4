package syncqueue

import (
	"path"
	"strings"
	"time"
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
// So the create of a file at such a name is held, for ScratchGrace from the
// first pass that sees it: the SDK renames within milliseconds, so a held
// file is almost always renamed before its grace ends, and then it is an
// ordinary create at its new name (or, over a file, the update above). Only
// the grace is memfs's to decide, not the file's fate: the name is also a
// name a user may choose, and a tool killed between close and rename leaves
// a real file. Once its grace is over, or at the final sync of a mount's end
// (the tree is frozen then: no rename can come), it is uploaded as any other
// create. Meanwhile status lists it as pending, with ReasonScratch and the
// time its grace ends (PendingChange.Until), and a pass counts it as left;
// if the final sync can't upload it, the mount's end counts it as left (exit
// status 3), never as stored. A memory the store already holds at such a
// name is not held: it has an origin, and its changes go up as any other.
const ScratchPrefix = ".agenttoolset-"

// ScratchGrace is how long a create at a scratch name is held (see
// ScratchPrefix), from the first pass that sees it. It is uploaded by the
// first pass after that: within an interval of the grace's end.
const ScratchGrace = 5 * time.Second

// isScratch reports whether a store path names a scratch file.
func isScratch(p string) bool {
	return strings.HasPrefix(path.Base(p), ScratchPrefix)
}

// scratchCreate reports whether a pending change is the create of a file
// at a scratch name: held for ScratchGrace, then uploaded.
func scratchCreate(origin, p string, deleted bool) bool {
	return origin == "" && !deleted && isScratch(p)
}

// scratchUntil is when the grace of a scratch create first seen at seen
// ends.
func scratchUntil(seen time.Time) time.Time { return seen.Add(ScratchGrace) }
