package main

// memfs mount accepts mount(8)-style options, -o ro,uid=1000,api_url=...,
// so that /etc/fstab and systemd .mount units can mount a store through
// mount.memfs (mounthelper.go). Each option is a spelling of one of memfs
// mount's flags and is applied as that flag, at its place on the command
// line: a later -o or flag wins over an earlier one, as in mount(8).
//
// Options that mount(8) and systemd pass for their own use (defaults,
// noauto, nofail, _netdev, x-systemd.*, user, ...) are accepted and do
// nothing here. Any other option is an error that names it, unless the
// helper runs sloppy (mount -s), where it is dropped with a warning.

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mountOptionValues are the NAME=VALUE options: NAME → the flag that takes VALUE.
var mountOptionValues = map[string]string{
	"uid":           "uid",
	"gid":           "gid",
	"file_mode":     "file-mode",
	"dir_mode":      "dir-mode",
	"umask":         "umask",
	"api_url":       "api-url",
	"api_key_file":  "api-key-file",
	"ca_file":       "ca-file",
	"state_dir":     "state-dir",
	"sync_interval": "memory-sync-interval",
	"sync_quiet":    "memory-sync-quiet",
	"mount_mode":    "mount-mode",
	"x-mount.mkdir": "mkdir", // also bare, below; the value is the mode of the folders created
}

// mountOptionSwitches are the options without a value: NAME → flag=value.
var mountOptionSwitches = map[string]flagSetting{
	"ro":            {"read-only", "true"},
	"rw":            {"read-only", "false"},
	"allow_other":   {"allow-other", "true"},
	"insecure_http": {"insecure-http", "true"},
	"x-mount.mkdir": {"mkdir", "true"},
}

// mountOptionsIgnored are options that mount(8), systemd or fstab use for
// themselves and pass along; they mean nothing to memfs. nosuid and nodev
// are always in effect on a memfs mount (FUSE sets them).
var mountOptionsIgnored = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "nofail": true, "_netdev": true,
	"user": true, "users": true, "nouser": true, "owner": true, "group": true,
	"nosuid": true, "nodev": true, "x-initrd.mount": true,
}

// mountOptionsIgnoredPrefixes are ignored with any suffix: systemd's
// x-systemd.*, fstab comments, and the user=NAME libmount adds for a
// mount by a user.
var mountOptionsIgnoredPrefixes = []string{"x-systemd.", "comment=", "user="}

// flagSetting is one flag to set: --name value.
type flagSetting struct{ name, value string }

// parseMountOptions reads one -o argument: comma-separated options. It
// returns the flags they set, in order, and the options ignored. Empty
// items (a trailing comma) are skipped. Every bad option is named in the
// error; with sloppy, unknown ones are returned in unknown instead (other
// mistakes, such as a missing value, are still errors).
func parseMountOptions(s string, sloppy bool) (set []flagSetting, ignored, unknown []string, err error) {
	var errs []string
	for _, opt := range strings.Split(s, ",") {
		if opt == "" {
			continue
		}
		name, value, hasValue := strings.Cut(opt, "=")
		if sw, ok := mountOptionSwitches[name]; ok && !hasValue {
			set = append(set, sw)
			continue
		}
		if fl, ok := mountOptionValues[name]; ok {
			if !hasValue || value == "" {
				errs = append(errs, fmt.Sprintf("mount option %s needs a value (%s=...)", name, name))
				continue
			}
			set = append(set, flagSetting{fl, value})
			continue
		}
		if _, ok := mountOptionSwitches[name]; ok {
			errs = append(errs, fmt.Sprintf("mount option %s takes no value, not %q", name, opt))
			continue
		}
		if ignoredMountOption(opt) {
			ignored = append(ignored, opt)
			continue
		}
		if name == "api_key" {
			// A key in the options is in /etc/fstab, in ps and in
			// /proc/self/mountinfo: never accept one.
			errs = append(errs, ("mount option api_key is not accepted (keys never go on a command line or in /etc/fstab): use api_key_file=FILE, a file only its owner can read"))
			continue
		}
		if sloppy {
			unknown = append(unknown, opt)
			continue
		}
		errs = append(errs, fmt.Sprintf("unknown mount option %q (memfs knows ro, rw, uid=, gid=, allow_other, api_url=, api_key_file=, ca_file=, insecure_http, state_dir=, sync_interval=, sync_quiet=, mount_mode=, file_mode=, dir_mode=, umask=, x-mount.mkdir)", opt))
	}
	if len(errs) > 0 {
		return set, ignored, unknown, errors.New(strings.Join(errs, "; "))
	}
	return set, ignored, unknown, nil
}

func ignoredMountOption(opt string) bool {
	if mountOptionsIgnored[opt] {
		return true
	}
	for _, p := range mountOptionsIgnoredPrefixes {
		if strings.HasPrefix(opt, p) {
			return true
		}
	}
	return false
}

// addMountOptionFlag adds -o OPTIONS to fset: each option sets its flag
// of fset at once (so the order of -o and flags decides which wins). A
// bad option is not the flag's error, which the flag package would print
// with the whole value (an api_key=... among them): call the returned
// check after parsing.
func addMountOptionFlag(fset *flag.FlagSet) (check func() error) {
	var first error
	fset.Func("o", "mount(8)-style options, comma-separated: ro, rw, uid=N, gid=N, allow_other, api_url=URL, api_key_file=FILE, ca_file=FILE, insecure_http, state_dir=DIR, sync_interval=DUR, sync_quiet=DUR, mount_mode=fuse|directory|auto, file_mode=, dir_mode=, umask=, x-mount.mkdir[=MODE]; defaults, noauto, nofail, _netdev, user, users and x-systemd.* are accepted and ignored", func(s string) error {
		set, _, _, err := parseMountOptions(s, false)
		for _, fs := range set {
			if err == nil {
				if serr := fset.Set(fs.name, fs.value); serr != nil {
					err = fmt.Errorf("%s: %w", fs.name, serr)
				}
			}
		}
		if first == nil && err != nil {
			first = usagef("-o: %v", err)
		}
		return nil
	})
	return func() error { return first }
}

// mkdirFlag is --mkdir[=MODE]: create MOUNTPOINT and its missing parents
// (like mkdir -p), the parents with MODE (default 0755, minus the umask,
// as mkdir(2) does). util-linux spells it -o x-mount.mkdir[=MODE].
type mkdirFlag struct {
	on   bool
	mode os.FileMode
}

func (m *mkdirFlag) IsBoolFlag() bool { return true }

func (m *mkdirFlag) String() string {
	if m == nil || !m.on {
		return "false"
	}
	return fmt.Sprintf("%#o", m.mode)
}

func (m *mkdirFlag) Set(s string) error {
	if !isNumber(s) {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true, false or an octal folder mode like 0755, not %q", s)
		}
		m.on, m.mode = b, 0
		if b {
			m.mode = 0o755
		}
		return nil
	}
	mode, err := strconv.ParseUint(s, 8, 32)
	if err != nil || mode > 0o777 || mode&0o700 != 0o700 {
		return fmt.Errorf("want an octal folder mode that lets its owner in (0700 to 0777, like 0755), not %q", s)
	}
	m.on, m.mode = true, os.FileMode(mode)
	return nil
}

// prepareMountDir checks MOUNTPOINT before mounting. Without --mkdir it
// must exist, as for mount(8): a typo must not mount a store at a new
// folder. With --mkdir its missing parents are created (mkdir -p); the
// mount point itself is created by the mount (and removed at unmount when
// that mount created it).
func prepareMountDir(dir string, mk mkdirFlag) error {
	if mk.on {
		if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), mk.mode); err != nil {
			return fmt.Errorf("--mkdir: %w", err)
		}
		return nil
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the mount point %s does not exist: create it (mkdir -p %s) or give --mkdir (-o x-mount.mkdir)", dir, dir)
	}
	return nil // anything else wrong with it is said by the mount
}
