package main

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	register("version", "print the version, VCS revision and Go version of this binary (also: memfs --version)", runVersion)
}

func runVersion(args []string) error {
	fset := flag.NewFlagSet("version", flag.ContinueOnError)
	fset.Usage = func() {
		fmt.Fprint(fset.Output(), `Usage: memfs version   (or: memfs --version)

Prints what this binary was built from: "memfs VERSION" (the module
version; "(devel)" for a build from a checkout), then one "name: value"
line each for the VCS revision, its commit time, whether the tree had
uncommitted changes (modified: true), the Go version and the platform
(GOOS/GOARCH). A build without VCS information (go run, a worktree,
-buildvcs=false, a tree that is not a git checkout) says "unknown" for
what it lacks.
`)
	}
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	fmt.Print(versionText(bi, runtime.GOOS+"/"+runtime.GOARCH))
	return nil
}

// versionText formats what bi says about the build; bi may be nil (a
// binary built without module support). Missing facts read "unknown", so
// a script can always find every line. Go's own version comes from bi
// (the toolchain that built the binary), else the runtime's.
func versionText(bi *debug.BuildInfo, platform string) string {
	const unknown = "unknown"
	version, revision, vcsTime, modified, goVersion := unknown, unknown, unknown, unknown, runtime.Version()
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "memfs %s\n", version)
	fmt.Fprintf(&b, "revision: %s\n", revision)
	fmt.Fprintf(&b, "time: %s\n", vcsTime)
	fmt.Fprintf(&b, "modified: %s\n", modified)
	fmt.Fprintf(&b, "go: %s\n", goVersion)
	fmt.Fprintf(&b, "platform: %s\n", platform)
	return b.String()
}
