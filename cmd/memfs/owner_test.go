package main

import (
	"flag"
	"io"
	"os"
	"testing"
)

func TestOwnerFlags(t *testing.T) {
	parse := func(args ...string) (*ownerFlags, error) {
		var o ownerFlags
		fset := flag.NewFlagSet("t", flag.ContinueOnError)
		fset.SetOutput(io.Discard)
		o.add(fset, "you")
		return &o, fset.Parse(args)
	}
	cases := []struct {
		args               []string
		uid, gid, file, dm uint32
		given, allow       bool
		bad                bool
	}{
		{args: nil, file: 0o644, dm: 0o755, allow: true},
		{args: []string{"--uid", "nobody"}, uid: 65534, gid: 65534, file: 0o644, dm: 0o755, given: true, allow: true},
		{args: []string{"--uid", "4242", "--gid", "4343"}, uid: 4242, gid: 4343, file: 0o644, dm: 0o755, given: true, allow: true},
		{args: []string{"--uid", "4242"}, uid: 4242, gid: 4242, file: 0o644, dm: 0o755, given: true, allow: true},
		{args: []string{"--file-mode", "600", "--dir-mode", "0700", "--allow-other", "false"}, file: 0o600, dm: 0o700},
		{args: []string{"--uid", "no-such-user-xyz"}, bad: true},
		{args: []string{"--gid", "no-such-group-xyz"}, bad: true},
		{args: []string{"--file-mode", "0888"}, bad: true},
		{args: []string{"--umask", "17777"}, bad: true},
		{args: []string{"--allow-other", "sometimes"}, bad: true},
	}
	root := os.Geteuid() == 0 // --allow-other defaults to true as root
	for _, tc := range cases {
		if tc.allow {
			tc.allow = root
		}
		o, err := parse(tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		own, given, allow, err := o.resolve()
		if tc.bad {
			if _, ok := err.(usageError); !ok {
				t.Errorf("%v: %v, want a usage error", tc.args, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if given != tc.given || allow != tc.allow || own.FileMode != tc.file || own.DirMode != tc.dm || (tc.given && (own.UID != tc.uid || own.GID != tc.gid)) {
			t.Errorf("%v: %+v given=%v allow=%v", tc.args, own, given, allow)
		}
	}
}
