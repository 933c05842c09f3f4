package main

import (
	"flag"
	"os"
	"os/user"
	"strconv"

	"github.com/memfs/memfs/fs"
)

// ownerFlags are who owns a mount and with which modes (docs/operating.md,
// "Owners, modes and limits"), the same on mount, worker, session and up.
type ownerFlags struct {
	uid, gid                 string
	fileMode, dirMode, umask string
	allowOther               string
}

func (o *ownerFlags) add(fset *flag.FlagSet, who string) {
	fset.StringVar(&o.uid, "uid", envOr("", "MEMFS_UID"), "user (name or number) owning the files loaded from the store and the mount's root (default: "+who+"; env MEMFS_UID)")
	fset.StringVar(&o.gid, "gid", envOr("", "MEMFS_GID"), "group (name or number) of those files (default: the --uid user's group; env MEMFS_GID)")
	fset.StringVar(&o.fileMode, "file-mode", envOr("0644", "MEMFS_FILE_MODE"), "mode of the files loaded from the store, octal (env MEMFS_FILE_MODE)")
	fset.StringVar(&o.dirMode, "dir-mode", envOr("0755", "MEMFS_DIR_MODE"), "mode of the folders, octal (env MEMFS_DIR_MODE)")
	fset.StringVar(&o.umask, "umask", envOr("0", "MEMFS_UMASK"), "bits taken out of --file-mode and --dir-mode, octal (env MEMFS_UMASK)")
	fset.StringVar(&o.allowOther, "allow-other", envOr("", "MEMFS_ALLOW_OTHER"), "true: users other than the one mounting may enter the mount (FUSE allow_other; modes still apply). Default: true as root (the worker mounts for the agent's user), false otherwise (a normal user needs user_allow_other in /etc/fuse.conf)")
}

// resolve returns the ownership the flags ask for, whether --uid or
// --gid was given (if not, the command's default owner applies: the
// caller sets UID and GID), and whether other users may enter the mount.
func (o *ownerFlags) resolve() (own fs.Ownership, ownerGiven, allowOther bool, err error) {
	if own.FileMode, err = parseMode("--file-mode", o.fileMode); err != nil {
		return own, false, false, err
	}
	if own.DirMode, err = parseMode("--dir-mode", o.dirMode); err != nil {
		return own, false, false, err
	}
	if own.Umask, err = parseMode("--umask", o.umask); err != nil {
		return own, false, false, err
	}
	allowOther = os.Geteuid() == 0
	if o.allowOther != "" {
		if allowOther, err = strconv.ParseBool(o.allowOther); err != nil {
			return own, false, false, usagef("--allow-other must be true or false, not %q", o.allowOther)
		}
	}
	if o.uid == "" && o.gid == "" {
		return own, false, allowOther, nil
	}
	own.UID, own.GID, err = lookupOwner(o.uid, o.gid)
	return own, true, allowOther, err
}

// lookupOwner reads --uid and --gid: a number, or a user or group name.
// A user without --gid brings its primary group.
func lookupOwner(uidArg, gidArg string) (uint32, uint32, error) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if uidArg != "" {
		u, err := user.LookupId(uidArg)
		if _, nerr := strconv.ParseUint(uidArg, 10, 32); nerr != nil {
			u, err = user.Lookup(uidArg)
		}
		switch {
		case err == nil:
			uid = parseID(u.Uid)
			gid = parseID(u.Gid)
		case isNumber(uidArg):
			uid = parseID(uidArg) // a uid with no passwd entry (a container's)
			gid = uid
		default:
			return 0, 0, usagef("--uid: no user %q", uidArg)
		}
	}
	if gidArg != "" {
		switch g, err := user.LookupGroup(gidArg); {
		case isNumber(gidArg):
			gid = parseID(gidArg)
		case err == nil:
			gid = parseID(g.Gid)
		default:
			return 0, 0, usagef("--gid: no group %q", gidArg)
		}
	}
	return uid, gid, nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

func parseID(s string) uint32 {
	v, _ := strconv.ParseUint(s, 10, 32)
	return uint32(v)
}

// parseMode reads an octal mode (0644, 644).
func parseMode(flagName, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, usagef("%s must be an octal mode like 0644, not %q", flagName, s)
	}
	return uint32(v), nil
}
