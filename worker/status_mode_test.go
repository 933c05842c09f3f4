package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus/hooks/test"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/client"
	"github.com/memfs/memfs/store/server/servertest"
	"github.com/memfs/memfs/syncqueue"
)

// shownMetrics is a MountMetrics that records what Shown was told.
type shownMetrics struct {
	mu     sync.Mutex
	mode   string
	folder func() dirmode.Stats
}

func (s *shownMetrics) Store(string) StoreMetrics { return s }

func (s *shownMetrics) Shown(mode string, folder func() dirmode.Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode, s.folder = mode, folder
}

func (s *shownMetrics) shown() (string, func() dirmode.Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode, s.folder
}

func (*shownMetrics) PassDone(syncqueue.PassInfo, map[string]int)   {}
func (*shownMetrics) RemoteApplied()                                {}
func (*shownMetrics) ConflictKept()                                 {}
func (*shownMetrics) ObserveOp(fs.Op, time.Duration, syscall.Errno) {}
func (*shownMetrics) Watch(func() syncqueue.Status)                 {}
func (*shownMetrics) Covered(int)                                   {}
func (*shownMetrics) Done()                                         {}

// TestDirectoryMountStatus: a store mounted in directory mode says so to
// memfs status (its JSON) and to the metrics, with what its watch
// and looks did, and lists a link planted in its folder as not uploaded,
// with its reason.
func TestDirectoryMountStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hs := httptest.NewServer(servertest.New(t))
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cl, err := client.New(client.Options{BaseURL: hs.URL, APIKey: servertest.AdminKey, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := cl.CreateStore(ctx, store.CreateStoreInput{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateMemory(ctx, st.ID, "/a.md", "alpha\n"); err != nil {
		t.Fatal(err)
	}
	log, _ := test.NewNullLogger()
	stateDir := t.TempDir()
	status, err := StartStatusServer(stateDir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer status.Close()
	rec := &shownMetrics{}
	m, err := MountStore(ctx, MountOptions{
		Engine:     syncqueue.EngineOptions{StoreID: st.ID, Store: cl, StateDir: stateDir, Interval: time.Hour, Log: log},
		Mountpoint: filepath.Join(t.TempDir(), "notes"), Mode: ModeDirectory, Log: log, Status: status, Metrics: rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx, true)
	if err := os.Symlink("/etc/passwd", filepath.Join(m.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	m.SyncNow(ctx, false, false)

	ps := status.Status()
	if len(ps.Mounts) != 1 {
		t.Fatalf("mounts %+v; want the one", ps.Mounts)
	}
	ms := ps.Mounts[0]
	if ms.Mode != ModeDirectory || ms.Directory == nil || ms.Directory.Looks == 0 || ms.Directory.LastLook.IsZero() {
		t.Fatalf("mode %q, directory %+v; want directory, with its looks", ms.Mode, ms.Directory)
	}
	var link *syncqueue.PendingChange
	for i, c := range ms.Sync.Pending {
		if c.Path == "/link" {
			link = &ms.Sync.Pending[i]
		}
	}
	if link == nil || link.Op != syncqueue.OpNotUploaded || !strings.Contains(link.Reason, "symbolic link") || ms.Sync.NotUploaded != 1 {
		t.Errorf("pending %+v (not uploaded: %d); want /link not uploaded, a symbolic link", ms.Sync.Pending, ms.Sync.NotUploaded)
	}
	b, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"mode":"directory"`, `"directory":{"looks":`, `"last_look_ms":`, `"watch_overflows":0`, `"read_only_restored":0`, `"redownloads":0`, `"watching":`, `"op":"not uploaded"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the JSON lacks %s:\n%s", want, b)
		}
	}
	mode, folder := rec.shown()
	if mode != ModeDirectory || folder == nil || folder().Looks == 0 {
		t.Errorf("the metrics were shown mode %q, stats %v; want directory, with its looks", mode, folder != nil)
	}
}
