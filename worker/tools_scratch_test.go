package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"
	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/server/servertest"
	"github.com/memfs/memfs/syncqueue"
)

// needFUSE skips a test that mounts unless it runs as root with /dev/fuse;
// under CI=true it fails instead.
func needFUSE(t *testing.T) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if os.Geteuid() != 0 {
		skip("needs root and /dev/fuse: not running as root")
	}
	if err := fs.CheckFUSE(); err != nil {
		skip("needs root and /dev/fuse: %v", err)
	}
}

// TestWriteToolSavesNeverUploadTemporaryFiles: the SDK's real write tool
// saves new files, and saves /a.md again and again, on a real mount while
// sync passes run back to back, so that passes fall between a temporary
// file's close and its rename: no memory is ever created at a temporary
// name (without the scratch rule, about one save in ten here uploads
// one), /a.md keeps its memory id through every save, and the store ends
// with the last save of each file.
func TestWriteToolSavesNeverUploadTemporaryFiles(t *testing.T) {
	needFUSE(t)
	srv := servertest.New(t)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	api, err := client.New(client.Options{BaseURL: hs.URL, APIKey: servertest.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := api.CreateStore(ctx, store.CreateStoreInput{Name: "saves"})
	if err != nil {
		t.Fatal(err)
	}
	orig, err := api.CreateMemory(ctx, st.ID, "/a.md", "v0\n")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	mnt := filepath.Join(dir, "mnt")
	m, err := MountStore(ctx, MountOptions{
		Engine:     syncqueue.EngineOptions{StoreID: st.ID, Store: api, StateDir: filepath.Join(dir, "state"), Interval: time.Hour, Log: quiet},
		Mountpoint: mnt, Log: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			m.Close(context.Background(), false)
		}
	}()

	stop := make(chan struct{})
	var passes sync.WaitGroup
	passes.Add(1)
	go func() {
		defer passes.Done()
		for {
			select {
			case <-stop:
				return
			default:
				m.Engine().SyncNow(ctx, false, false)
			}
		}
	}()
	write := agenttoolset.BetaWriteTool(&agenttoolset.AgentToolContext{Workdir: filepath.Join(dir, "work"), AllowedRoots: []string{mnt}})
	want := map[string]string{}
	save := func(p, content string) {
		t.Helper()
		in, _ := json.Marshal(map[string]string{"file_path": mnt + p, "content": content})
		if _, err := write.Execute(ctx, in); err != nil {
			t.Fatalf("save %s: %v", p, err)
		}
		want[p] = content
	}
	const saves = 150
	for i := range saves {
		save(fmt.Sprintf("/new/n%d.md", i), fmt.Sprintf("v%d\n", i))
		save("/a.md", fmt.Sprintf("a%d\n", i))
	}
	close(stop)
	passes.Wait()
	save("/a.md", "v1\n")
	if err := m.Close(ctx, true); err != nil {
		t.Fatal(err)
	}
	closed = true
	if l := m.Left(); !l.Empty() {
		t.Errorf("the mount left %s", l)
	}

	ms, err := api.AllMemories(ctx, st.ID, store.ListMemoriesOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mem := range ms {
		got[mem.Path] = *mem.Content
		if mem.Path == "/a.md" && mem.ID != orig.ID {
			t.Errorf("/a.md is memory %s after the saves, want %s: an atomic save is an update", mem.ID, orig.ID)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("the store holds %v, want %v", got, want)
	}
	created := 0
	for v, err := range api.Versions(ctx, st.ID, store.ListVersionsOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if v.Operation == "created" {
			created++
		}
		if v.Path != nil && strings.Contains(*v.Path, syncqueue.ScratchPrefix) {
			t.Fatalf("a temporary file went up: version %s %s of %s at %s", v.ID, v.Operation, v.MemoryID, *v.Path)
		}
	}
	if created != 1+saves {
		t.Errorf("%d memories were created, want %d (/a.md and the new files)", created, 1+saves)
	}
}
