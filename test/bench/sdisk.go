package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Where the S and DM measures put their folders (memfs's mount point and
// state directory, the official session's workdir).
//
// By default on a fresh ext4 filesystem of their own, made for each
// measure on a sparse loop image under /tmp: a disk with nothing deleted
// on it. The reason is a cost of the disk that is neither system's: on an
// ext4 without a journal (this kind of machine's root), an inode freed in
// the last ~35 s is not reused, and every create walks past the freed
// ones (ext4's recently_deleted, seen with perf: up to 0.5 ms of kernel
// time per create after 10,000 deletes). Each timed run follows the
// teardown of the other system's run, whose 10,000 deletes would then be
// charged to whichever ran second. On a journaled ext4 (mkfs.ext4's
// default) that walk does not happen at all.
//
// -sdisk tmp puts the folders in /tmp as before; -sdisk fresh without
// root or the tools says so and stops.
var sdisk = "fresh"

func init() {
	flag.StringVar(&sdisk, "sdisk", sdisk, "S and DM measures: where the folders go: fresh (a new ext4 filesystem on a loop image, per measure; needs root) or tmp (/tmp)")
}

// freshDisk makes and mounts the measure's filesystem and returns its
// root, the undo adding its unmount and removal.
func freshDisk(undo *cleanups) (string, error) {
	switch sdisk {
	case "tmp":
		return "", nil // os.MkdirTemp's default
	case "fresh":
	default:
		return "", fmt.Errorf("-sdisk %q: fresh or tmp", sdisk)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("-sdisk fresh needs root (a loop mount); -sdisk tmp runs without")
	}
	dir, err := os.MkdirTemp("", sTempPfx+"disk-")
	if err != nil {
		return "", err
	}
	undo.add(func() error { return os.RemoveAll(dir) })
	img, mnt := filepath.Join(dir, "ext4.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(4 << 30) // sparse: holds what the measures write
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return "", err
	}
	run := func(name string, args ...string) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("-sdisk fresh: %s %s: %v: %s (-sdisk tmp runs without)", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run("mkfs.ext4", "-q", "-F", img); err != nil {
		return "", err
	}
	if err := run("mount", "-o", "loop", img, mnt); err != nil {
		return "", err
	}
	undo.add(func() error { return run("umount", mnt) })
	return mnt, nil
}
