package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/dirmode"
	"github.com/memfs/memfs/fs"
	"github.com/memfs/memfs/syncqueue"
)

// StatusServer answers memfs status for the mounts this process serves.
// Each process that mounts (memfs mount, worker, session, up) listens on
// its own unix socket, <state dir>/run/<pid>.sock, mode 0600 in a 0700
// directory, and answers GET /status with a ProcessStatus in JSON — live
// figures, read from the engines (and the conflict counts, read from the
// state dir's conflict log; nothing is written). The
// process removes its socket when it stops; a socket left by a killed
// process refuses connections and is skipped (and removed by the next
// process that starts in the state dir).
//
// Lifecycle: StartStatusServer, then Close. A nil *StatusServer is valid
// and serves nothing (tests that mount in-process).
type StatusServer struct {
	path     string
	stateDir string
	ln       net.Listener
	srv      *http.Server
	started  time.Time
	done     chan struct{}

	mu        sync.Mutex
	mounts    map[*Mounted]MountLabels     // GUARDED_BY(mu)
	unmounted map[*UnmountedStore]struct{} // GUARDED_BY(mu)
}

// MountLabels name what a mount belongs to, for status.
type MountLabels struct {
	SessionID string `json:"session_id,omitempty"`
	WorkID    string `json:"work_id,omitempty"`
	// AsOf is the time of a mount of the store as it was (memfs mount
	// --at): read-only, and following nothing.
	AsOf *time.Time `json:"as_of,omitempty"`
}

// ProcessStatus is one process's answer.
type ProcessStatus struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// StateDir is the state dir the process uses (its socket's).
	StateDir string        `json:"state_dir"`
	Started  time.Time     `json:"started"`
	Mounts   []MountStatus `json:"mounts"`
	// Unmounted are the stores of running sessions that were unmounted
	// from outside the process (umount): their sessions run on without
	// them. Each is listed until its session ends.
	Unmounted []UnmountedStore `json:"unmounted_from_outside,omitempty"`
}

// UnmountedStore is a store of a running session that someone unmounted
// from outside the worker (Session.endUnmounted).
type UnmountedStore struct {
	Dir     string `json:"dir"`
	StoreID string `json:"store_id"`
	MountLabels
	At time.Time `json:"at"`
	// Left is what its final sync left in the journal ("nothing", or the
	// changes and why).
	Left string `json:"left"`
	// Error says it in a sentence.
	Error string `json:"error"`
}

// MountStatus is one mount of a process.
type MountStatus struct {
	Dir     string `json:"dir"`
	StoreID string `json:"store_id"`
	// StoreName is the store's name as read at mount.
	StoreName string `json:"store_name"`
	// Access is read_only or read_write, from the kernel's mount flags.
	Access string `json:"access"`
	// Mode is how the store is shown: ModeFUSE or ModeDirectory.
	Mode string `json:"mode"`
	// Directory is what the folder's watch and looks have done (directory
	// mode only).
	Directory *dirmode.Stats `json:"directory,omitempty"`
	MountLabels
	// LastSyncAgeSeconds is how long before the answer Sync.LastSync was,
	// so scripts need no clock of their own; absent before the first
	// successful sync.
	LastSyncAgeSeconds *float64 `json:"last_sync_age_seconds,omitempty"`
	// Conflicts is how many local versions of this store the state dir's
	// conflict log keeps (memfs conflicts list).
	Conflicts int `json:"conflicts"`
	// Covered lists what is mounted over or inside the mount path, each
	// with its error (covered.go); absent when nothing is.
	Covered []MountCover     `json:"covered,omitempty"`
	Sync    syncqueue.Status `json:"sync"`
}

// statusDir is where the sockets of a state dir live.
func statusDir(stateDir string) string { return filepath.Join(stateDir, "run") }

// StartStatusServer listens on this process's socket in stateDir.
func StartStatusServer(stateDir string, log logrus.FieldLogger) (*StatusServer, error) {
	dir := statusDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("status socket: %w", err)
	}
	removeStaleSockets(dir)
	path := filepath.Join(dir, strconv.Itoa(os.Getpid())+".sock")
	os.Remove(path) // a pid reused after a crash
	ln, err := listenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("status socket %s: %w", path, err)
	}
	s := &StatusServer{path: path, stateDir: stateDir, ln: ln, started: time.Now(), done: make(chan struct{}),
		mounts: map[*Mounted]MountLabels{}, unmounted: map[*UnmountedStore]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		json.NewEncoder(w).Encode(s.Status())
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Warn("the status socket stopped; memfs status can't see this process")
		}
	}()
	return s, nil
}

// listenUnix listens on a unix socket at path with mode 0600. A path
// longer than a socket address may be (108 bytes) is reached through
// /proc/self/fd/N of its directory, which the kernel resolves.
func listenUnix(path string) (net.Listener, error) {
	var ln net.Listener
	err := viaShortPath(path, func(p string) error {
		var err error
		ln, err = net.Listen("unix", p)
		return err
	})
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// viaShortPath runs fn with path, or with /proc/self/fd/N/<name> when path
// is too long for a unix socket address.
func viaShortPath(path string, fn func(p string) error) error {
	if len(path) < 100 {
		return fn(path)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)))
}

// removeStaleSockets removes the sockets of processes that are gone.
func removeStaleSockets(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	for _, n := range names {
		pid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(n), ".sock"))
		if err == nil && pid != os.Getpid() && !processAlive(pid) {
			os.Remove(n)
		}
	}
}

func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

// Close stops serving and removes the socket.
func (s *StatusServer) Close() error {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

func (s *StatusServer) add(m *Mounted, l MountLabels) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mounts[m] = l
}

func (s *StatusServer) remove(m *Mounted) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mounts, m)
}

// addUnmounted lists u until the returned func is called (at the end of
// its session).
func (s *StatusServer) addUnmounted(u UnmountedStore) (forget func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &u
	s.unmounted[p] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.unmounted, p)
	}
}

// Status is this process's answer.
func (s *StatusServer) Status() ProcessStatus {
	ps := ProcessStatus{PID: os.Getpid(), Command: strings.Join(os.Args[:min(2, len(os.Args))], " "), StateDir: s.stateDir, Started: s.started}
	s.mu.Lock()
	mounts := make(map[*Mounted]MountLabels, len(s.mounts))
	for m, l := range s.mounts {
		mounts[m] = l
	}
	for u := range s.unmounted {
		ps.Unmounted = append(ps.Unmounted, *u)
	}
	s.mu.Unlock()
	sort.Slice(ps.Unmounted, func(i, j int) bool { return ps.Unmounted[i].At.Before(ps.Unmounted[j].At) })
	kernel := map[string]fs.MountInfo{}
	if mis, err := fs.Mounts(); err == nil {
		for _, mi := range mis {
			// The first memfs mount listed at a path: a mount stacked over
			// it later (mount --bind) is not it.
			if _, ok := kernel[mi.Dir]; !ok && mi.FSType == "fuse."+fs.FSType {
				kernel[mi.Dir] = mi
			}
		}
	}
	conflicts := ConflictCounts(s.stateDir)
	now := time.Now()
	for m, l := range mounts {
		st := m.engine.Status()
		access := "read_write"
		if mi, ok := kernel[m.Dir()]; ok && mi.ReadOnly() || st.ReadOnly {
			access = "read_only"
		}
		ms := MountStatus{Dir: m.Dir(), StoreID: st.StoreID, StoreName: st.StoreName, Access: access, Mode: m.Mode(), Directory: m.folderStats(), MountLabels: l,
			Conflicts: conflicts[st.StoreID], Covered: mountCovers(m.Covered()), Sync: st}
		if st.LastSync != nil {
			age := now.Sub(*st.LastSync).Seconds()
			ms.LastSyncAgeSeconds = &age
		}
		ps.Mounts = append(ps.Mounts, ms)
	}
	sort.Slice(ps.Mounts, func(i, j int) bool { return ps.Mounts[i].Dir < ps.Mounts[j].Dir })
	return ps
}

// ConflictCounts counts the conflicts a state dir's log keeps, per store.
// It only reads.
func ConflictCounts(stateDir string) map[string]int {
	all, _ := syncqueue.OpenConflictLog(stateDir, syncqueue.ConflictRetention{}).List()
	out := map[string]int{}
	for _, c := range all {
		out[c.StoreID]++
	}
	return out
}

// ReadStatuses asks every live process serving mounts from stateDir for
// its status. A socket that refuses (its process is gone) is skipped.
func ReadStatuses(ctx context.Context, stateDir string) []ProcessStatus {
	names, _ := filepath.Glob(filepath.Join(statusDir(stateDir), "*.sock"))
	var out []ProcessStatus
	for _, n := range names {
		ps, err := readStatus(ctx, n)
		if err == nil {
			out = append(out, ps)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func readStatus(ctx context.Context, path string) (ProcessStatus, error) {
	var ps ProcessStatus
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var c net.Conn
		err := viaShortPath(path, func(p string) error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, "unix", p)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://memfs/status", nil)
	if err != nil {
		return ps, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return ps, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ps, fmt.Errorf("status socket %s answered %s", path, resp.Status)
	}
	return ps, json.NewDecoder(resp.Body).Decode(&ps)
}
