package worker

import (
	"fmt"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
)

// Mounts over or inside a store's mount path (docs/operating.md, "Mounts
// over a store").
//
// Root can mount something over a store's mount path, over a directory
// above it, or on a directory in the mount (mount --bind /tmp/fake
// /mnt/memory/notes): the agent then reads files that are not the store's
// there, and whatever it writes there goes to the cover, not the store.
// The mount-table watch (fs.Mount.Covered) finds every such cover; for
// each, memfs status shows an error on the store (MountStatus.Covered),
// the log has one error line when it appears and one info line when it is
// gone, and memfs_mount_covers counts them.
//
// The session keeps running: the FUSE mount under the cover is still the
// store's, still synced, and the agent's files that reached it are safe;
// ending the session would punish the agent for what root did and would
// take the store's own files away too. An operator who wants the cover
// gone unmounts it (umount <mount point>); the error clears by itself. A
// stop still detaches the covers standing on the mount with it (fs.Unmount).

// MountCover is a mount over or inside a store's mount path, as memfs
// status shows it.
type MountCover struct {
	// Where is "over" (at the mount path, or at a directory above it:
	// it hides the whole store) or "inside" (on a directory in the
	// mount: it hides that directory).
	Where      string `json:"where"`
	MountPoint string `json:"mount_point"`
	FSType     string `json:"fstype"`
	Source     string `json:"source"`
	// Root is the directory of the source's filesystem it shows ("/",
	// or the directory a bind mount binds).
	Root string `json:"root"`
	// Error says it in a sentence (coverError).
	Error string `json:"error"`
}

// What is the cover's type and source, as the error gives them:
// "ext4 /dev/vda[/tmp/fake]".
func (c MountCover) What() string { return c.FSType + " " + coverSource(c.Source, c.Root) }

// coverError is what status and the log say of a cover.
func coverError(c fs.Cover) string {
	return fmt.Sprintf("something is mounted %s the store's mount path: %s (%s %s); the agent may see files that are not the store's",
		c.Where(), c.Dir, c.FSType, coverSource(c.Source, c.Root))
}

// coverSource is a cover's source as findmnt writes it: with the
// directory it shows in brackets when that is not its filesystem's root
// (a bind mount: /dev/vda[/tmp/fake]).
func coverSource(source, root string) string {
	if root == "" || root == "/" {
		return source
	}
	return source + "[" + root + "]"
}

// mountCovers is covers as status shows them (nil for none).
func mountCovers(covers []fs.Cover) []MountCover {
	var out []MountCover
	for _, c := range covers {
		out = append(out, MountCover{Where: c.Where(), MountPoint: c.Dir, FSType: c.FSType, Source: c.Source, Root: c.Root, Error: coverError(c)})
	}
	return out
}

// coverChanges is what changed from before to after: the covers that
// appeared and those that went, each in the order it is listed. A cover
// is known by its mount id and mount point.
func coverChanges(before, after []fs.Cover) (appeared, went []fs.Cover) {
	same := func(a fs.Cover) func(fs.Cover) bool {
		return func(b fs.Cover) bool { return a.ID == b.ID && a.Dir == b.Dir }
	}
	for _, c := range after {
		if !slices.ContainsFunc(before, same(c)) {
			appeared = append(appeared, c)
		}
	}
	for _, c := range before {
		if !slices.ContainsFunc(after, same(c)) {
			went = append(went, c)
		}
	}
	return appeared, went
}

// coverReport tells the log and the metrics of one mount what covers it.
// Its changed is the mount's fs.MountOptions.OnCover: the mount-table
// watch calls it, one call at a time, and is the only user of last.
type coverReport struct {
	log     logrus.FieldLogger
	metrics StoreMetrics // nil without metrics
	last    []fs.Cover
}

func (r *coverReport) changed(now []fs.Cover) {
	appeared, went := coverChanges(r.last, now)
	r.last = now
	for _, c := range appeared {
		r.fields(c).Error(coverError(c))
	}
	for _, c := range went {
		r.fields(c).Info(fmt.Sprintf("%s is no longer mounted %s the store's mount path", c.Dir, c.Where()))
	}
	if r.metrics != nil {
		r.metrics.Covered(len(now))
	}
}

func (r *coverReport) fields(c fs.Cover) logrus.FieldLogger {
	return r.log.WithFields(logrus.Fields{"cover": c.Dir, "cover_type": c.FSType, "cover_source": coverSource(c.Source, c.Root)})
}
