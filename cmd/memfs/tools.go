package main

import (
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/memfs/memfs/worker"
)

// toolFlags are the flags of --run-tools on memfs worker and memfs session
// (memfs up takes --run-tools alone).
type toolFlags struct {
	runTools    bool
	workdir     string
	maxIdle     time.Duration
	toolEnv     map[string]string
	toolEnvFile string
	user        string // --tools-user ("": the default)
	network     string
	given       []string // the tool flags given, for "only with --run-tools"
}

func (f *toolFlags) add(fset *flag.FlagSet) {
	fset.BoolVar(&f.runTools, "run-tools", false, "also run the session's tools (bash, read, write, edit, glob, grep) with the official SDK's session tool runner, once its stores are mounted")
	fset.Func("workdir", "with --run-tools: the parent of the sessions' work directories; each session works in DIR/<session id> (default <state dir>/work)", func(s string) error {
		f.given = append(f.given, "--workdir")
		if s == "" {
			return fmt.Errorf("the work directory is empty")
		}
		f.workdir = s
		return nil
	})
	f.maxIdle = anthropic.DefaultMaxIdle
	fset.Func("max-idle", fmt.Sprintf("with --run-tools: how long a session may stay idle after its turn ended before it ends cleanly; 0 never (default %s, as the SDK's worker)", anthropic.DefaultMaxIdle), func(s string) error {
		f.given = append(f.given, "--max-idle")
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("%q is not a duration of 0 or more (60s, 5m, 0)", s)
		}
		f.maxIdle = d
		return nil
	})
	fset.Func("tool-env", "with --run-tools: KEY=VALUE for the agent's shell (repeatable); it gets only PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, LC_*, TZ, TMPDIR from the worker, plus these", func(s string) error {
		f.given = append(f.given, "--tool-env")
		k, v, err := worker.ParseToolEnv(s)
		if err != nil {
			return err
		}
		if f.toolEnv == nil {
			f.toolEnv = map[string]string{}
		}
		f.toolEnv[k] = v
		return nil
	})
	fset.Func("tools-user", "with --run-tools: the user (name or number) the agent's tools run as, in their sandbox; root only if given as root (default: the owner of --memory-root, which must not be root; env MEMFS_TOOLS_USER)", func(s string) error {
		f.given = append(f.given, "--tools-user")
		if s == "" {
			return fmt.Errorf("the tools user is empty")
		}
		f.user = s
		return nil
	})
	fset.Func("tools-network", "with --run-tools: host (the host's network) or none (only loopback; the tools still reach the API through the worker) (default host; env MEMFS_TOOLS_NETWORK)", func(s string) error {
		f.given = append(f.given, "--tools-network")
		if s != worker.NetworkHost && s != worker.NetworkNone {
			return fmt.Errorf("%q is not host or none", s)
		}
		f.network = s
		return nil
	})
	fset.Func("tool-env-file", "with --run-tools: a file of KEY=VALUE lines for the agent's shell (# comments; values verbatim); --tool-env wins", func(s string) error {
		f.given = append(f.given, "--tool-env-file")
		f.toolEnvFile = s
		return nil
	})
}

// options maps the flags onto worker.ToolsOptions (nil without
// --run-tools). A tool flag without --run-tools is a usage error.
// memoryRoot's owner is the default tools user.
func (f *toolFlags) options(memoryRoot string) (*worker.ToolsOptions, error) {
	if f.user == "" {
		f.user = os.Getenv("MEMFS_TOOLS_USER")
	}
	if f.network == "" {
		f.network = os.Getenv("MEMFS_TOOLS_NETWORK")
	}
	if !f.runTools {
		if len(f.given) > 0 {
			return nil, usagef("%s only works with --run-tools", f.given[0])
		}
		return nil, nil
	}
	extra := map[string]string{}
	if f.toolEnvFile != "" {
		fileEnv, err := worker.ReadToolEnvFile(f.toolEnvFile)
		if err != nil {
			return nil, usagef("--tool-env-file: %v", err)
		}
		extra = fileEnv
	}
	for k, v := range f.toolEnv {
		extra[k] = v
	}
	maxIdle := f.maxIdle
	o := &worker.ToolsOptions{WorkRoot: f.workdir, MaxIdle: &maxIdle, Env: worker.ToolEnv(os.Environ(), extra), Network: f.network}
	var err error
	if o.User, o.AllowRoot, err = toolsUser(f.user, memoryRoot); err != nil {
		return nil, err
	}
	return o, nil
}

// toolsUser resolves --tools-user: a user name or number ("root" allows
// root); "" is the owner of memoryRoot when the worker is root (root
// itself then, if the root is root's or not there yet: refused by
// worker.ToolsOptions), else the worker's own user.
func toolsUser(arg, memoryRoot string) (worker.ToolsUser, bool, error) {
	explicit := arg != ""
	if !explicit {
		uid := uint32(os.Geteuid())
		if uid == 0 {
			var st unix.Stat_t
			if err := unix.Stat(memoryRoot, &st); err == nil {
				uid = st.Uid
			}
		}
		arg = strconv.FormatUint(uint64(uid), 10)
	}
	uid, gid, err := lookupOwner(arg, "")
	if err != nil {
		return worker.ToolsUser{}, false, usagef("--tools-user: no user %q", arg)
	}
	u := worker.ToolsUser{UID: uid, GID: gid}
	if pw, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		u.Name = pw.Username
	}
	return u, explicit && uid == 0, nil
}

// hideCredentials takes memfs's and Anthropic's keys out of this process's
// environment once they are read, before the agent's tools run
// (worker.HideCredentials).
func hideCredentials(log logrus.FieldLogger) {
	names, err := worker.HideCredentials()
	if err != nil {
		log.WithError(err).Warn("the keys of this process's environment may still be readable by the agent's tools")
	}
	if len(names) > 0 {
		log.WithField("variables", names).Debug("keys removed from the environment the agent's tools could see")
	}
}

// keyFiles are the absolute paths of the key files given (the sandbox
// masks them).
func keyFiles(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, abs)
		}
	}
	return out
}
