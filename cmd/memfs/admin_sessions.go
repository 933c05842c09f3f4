package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
)

var environmentsGroup = &adminGroup{
	name: "environments",
	about: `Manages self-hosted environments: each has a work queue that workers poll
with the environment's key.`,
	verbs: []verb{
		{"create", "NAME", "create an environment; prints its id and key (shown only once)", environmentsCreate},
		{"get", "ENVIRONMENT", "show an environment", environmentsGet},
		{"healthcheck", "ENVIRONMENT", "queue a healthcheck work item", environmentsHealthcheck},
	},
}

var sessionsGroup = &adminGroup{
	name: "sessions",
	about: `Manages sessions: creating one queues a work item on its environment; a
worker claims it and mounts the attached memory stores.`,
	verbs: []verb{
		{"create", "--environment ENV --store ID[:ro] ...", "create a session attaching memory stores", sessionsCreate},
		{"get", "SESSION", "show a session", sessionsGet},
		{"archive", "SESSION", "end a session (its work item moves to stopping)", sessionsArchive},
		{"events", "VERB SESSION ...", "the session's event log: ls, post (an agent's tool use), stream", nil},
	},
}

func init() {
	registerGroup(environmentsGroup, "manage environments (create, get, healthcheck)")
	registerGroup(sessionsGroup, "manage sessions (create, get, archive, events)")
}

func environmentsCreate(a *admin, args []string) error {
	a.flags("NAME", `
Creates a self-hosted environment and prints its id and its environment key.
The key is shown only now: save it in a file only the worker's user can
read (chmod 600) and give the worker --environment-key-file FILE (or
MEMFS_ENVIRONMENT_KEY), not --environment-key, which ps shows to everyone.

Example:
  memfs environments create sandbox-hosts`)
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.CreateEnvironment(a.ctx, client.CreateEnvironmentInput{Name: pos[0]})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(e)
	}
	a.printf("%s\n%s\n", e.ID, e.EnvironmentKey)
	a.note("the second line is the environment key; it is not shown again")
	return nil
}

func environmentsGet(a *admin, args []string) error {
	a.flags("ENVIRONMENT", "\nShows an environment.")
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	e, err := c.GetEnvironment(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(e)
	}
	w := a.fields()
	fmt.Fprintf(w, "id:\t%s\n", e.ID)
	fmt.Fprintf(w, "name:\t%s\n", oneLine(e.Name))
	fmt.Fprintf(w, "created:\t%s\n", fmtTime(e.CreatedAt))
	return w.Flush()
}

func environmentsHealthcheck(a *admin, args []string) error {
	a.flags("ENVIRONMENT", "\nQueues a healthcheck work item: a worker claims it and stops it.")
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	wk, err := c.EnqueueHealthcheck(a.ctx, pos[0])
	if store.ExtensionRefused(err) {
		// A memfs extension: any refusal may mean the server lacks it.
		return fmt.Errorf("%w\nhint: the healthcheck (POST /v1/environments/{id}/healthcheck) is a memfs serve extension: a server without it, like the hosted API, refuses the route", err)
	}
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(wk)
	}
	a.printf("%s\n", wk.ID)
	return nil
}

// storeList collects --store ID[:ro] flags.
type storeList []client.SessionResourceInput

func (s *storeList) String() string { return "" }

func (s *storeList) Set(v string) error {
	id, access := v, store.AccessReadWrite
	if i := strings.LastIndex(v, ":"); i > 0 {
		switch v[i+1:] {
		case "ro":
			id, access = v[:i], store.AccessReadOnly
		case "rw":
			id = v[:i]
		default:
			return usagef("--store takes ID, ID:ro or ID:rw, not %q", v)
		}
	}
	*s = append(*s, client.SessionResourceInput{MemoryStoreID: id, Access: access})
	return nil
}

func sessionsCreate(a *admin, args []string) error {
	fs := a.flags("--environment ENV --store ID[:ro] ... [--agent AGENT]", `
Creates a session on an environment, attaching up to 8 memory stores
(":ro" attaches one read-only), and prints its id. Its work item is queued
for a worker. The session runs --agent, or memfs's default agent (named
memfs, metadata memfs=default), made the first time it is needed.

Example:
  memfs sessions create --environment env_... --store memstore_a --store memstore_b:ro`)
	env := fs.String("environment", "", "the environment id")
	agent := fs.String("agent", "", "the agent id the session runs (default: memfs's default agent)")
	var stores storeList
	fs.Var(&stores, "store", "a memory store to attach: ID, or ID:ro for read-only (repeatable)")
	if _, err := a.parse(args, 0, 0); err != nil {
		return err
	}
	if *env == "" {
		return usagef("--environment is required")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if *agent == "" {
		if *agent, err = c.EnsureDefaultAgent(a.ctx); err != nil {
			return fmt.Errorf("find or make the default agent: %w", err)
		}
	}
	s, err := c.CreateSession(a.ctx, client.CreateSessionInput{Agent: *agent, EnvironmentID: *env, Resources: stores})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(s)
	}
	a.printf("%s\n", s.ID)
	for _, r := range s.Resources {
		a.note("%s (%s) -> %s", r.MemoryStoreID, r.Access, r.MountPath)
	}
	return nil
}

func sessionsGet(a *admin, args []string) error {
	a.flags("SESSION", "\nShows a session: its status and attached stores with their mount paths.")
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := c.GetSession(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(s)
	}
	w := a.table("STORE", "ACCESS", "MOUNT PATH", "NAME")
	for _, r := range s.Resources {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.MemoryStoreID, r.Access, r.MountPath, oneLine(r.Name))
	}
	var ag struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Version int64  `json:"version"`
	}
	if json.Unmarshal(s.Agent, &ag) == nil && ag.ID != "" {
		a.note("session %s: %s, agent %s (%s, version %d)", s.ID, s.Status, ag.ID, oneLine(ag.Name), ag.Version)
	} else {
		a.note("session %s: %s", s.ID, s.Status)
	}
	return w.Flush()
}

func sessionsArchive(a *admin, args []string) error {
	a.flags("SESSION", "\nEnds a session: its worker uploads the last edits, unmounts and stops.")
	pos, c, err := a.parseClient(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := c.ArchiveSession(a.ctx, pos[0])
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(s)
	}
	a.printf("%s %s\n", s.ID, s.Status)
	return nil
}
