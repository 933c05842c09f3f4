package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/test/harness"
)

// upStartTimeout bounds memfs up from its start to its banner: serve
// started, the demo store and session created, the store mounted.
const upStartTimeout = 60 * time.Second

// What memfs up's banner says about the demo store and the store service.
var (
	upStoreRe = regexp.MustCompile(`memory store\s+(memstore_\S+), mounted at (\S+)`)
	upURLRe   = regexp.MustCompile(`store service\s+(http://\S+)`)
)

// upInstance is a running `memfs up` and what its banner and data dir
// tell about it.
type upInstance struct {
	proc     *harness.Proc
	dataDir  string // --data-dir, holding admin.key (and the store's database)
	root     string // --memory-root
	storeID  string // the demo store
	dir      string // where the demo store is mounted
	url      string // the store service's base URL
	adminKey string // the contents of <dataDir>/admin.key
}

// startUp starts `memfs up` on a data dir and a memory root under the
// test's temp dir, with args added (--memory-sync-interval, say), and
// waits for its banner. When the test ends the process is killed if it
// still runs and anything left mounted under the memory root is detached,
// so a failed test leaves no mount behind.
func startUp(t *testing.T, args ...string) *upInstance {
	t.Helper()
	base := t.TempDir()
	u := &upInstance{dataDir: filepath.Join(base, "data"), root: filepath.Join(base, "mnt")}
	u.proc = harness.StartProc(t, harness.ProcOptions{},
		append([]string{"up", "--data-dir", u.dataDir, "--memory-root", u.root, "--listen", "127.0.0.1:0"}, args...)...)
	t.Cleanup(func() {
		if u.proc.Running() {
			u.proc.Kill()
		}
		harness.DetachUnder(u.root)
	})
	u.proc.WaitOutput(1, upStartTimeout, "memfs is up.")
	// The banner's lines arrive one by one: its last line says it is all
	// there (the lines read below from Output come before it).
	u.proc.WaitOutput(1, wkQuickTimeout, "Ctrl-C uploads what is pending")
	m := upStoreRe.FindStringSubmatch(u.proc.WaitOutput(1, wkQuickTimeout, "memory store", "mounted at"))
	if m == nil {
		t.Fatalf("no store and mount path in the banner:\n%s", u.proc.Output())
	}
	u.storeID, u.dir = m[1], m[2]
	s := upURLRe.FindStringSubmatch(u.proc.Output())
	if s == nil {
		t.Fatalf("no store service URL in the banner:\n%s", u.proc.Output())
	}
	u.url = s[1]
	key, err := os.ReadFile(filepath.Join(u.dataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	u.adminKey = strings.TrimSpace(string(key))
	return u
}

// waitContent polls the store service of the running memfs up until the
// demo store's memory at path holds want.
func (u *upInstance) waitContent(t *testing.T, path, want string) {
	t.Helper()
	cl, err := client.New(client.Options{BaseURL: u.url, APIKey: u.adminKey})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wkSyncTimeout)
	for wkContents(t, cl, u.storeID)[path] != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach the store within %s", path, wkSyncTimeout)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// storeAfterExit starts memfs serve on the data dir of a memfs up that has
// exited and returns the demo store as path -> content: what up uploaded
// before it exited, read from its database.
func (u *upInstance) storeAfterExit(t *testing.T) map[string]string {
	t.Helper()
	s := harness.StartServe(t, harness.ServeOptions{DataDir: u.dataDir, AdminKey: u.adminKey})
	cl, err := client.New(client.Options{BaseURL: s.URL, APIKey: u.adminKey})
	if err != nil {
		t.Fatal(err)
	}
	return wkContents(t, cl, u.storeID)
}

// sessionAgentsAfterExit reads, through a memfs serve on memfs up's data
// dir after it exited, the agent id of every session memfs up created.
func (u *upInstance) sessionAgentsAfterExit(t *testing.T) []string {
	t.Helper()
	s := harness.StartServe(t, harness.ServeOptions{DataDir: u.dataDir, AdminKey: u.adminKey})
	a := rawCall(t, s.URL, "GET", "/v1/sessions", u.adminKey, nil, nil)
	var page struct {
		Data []struct {
			Agent struct {
				ID string `json:"id"`
			} `json:"agent"`
		} `json:"data"`
	}
	if a.status != 200 || json.Unmarshal(a.body, &page) != nil {
		t.Fatalf("list sessions: %d %s", a.status, a.body)
	}
	var ids []string
	for _, s := range page.Data {
		ids = append(ids, s.Agent.ID)
	}
	return ids
}
