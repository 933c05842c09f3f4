package syncqueue

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/memfs/memfs/store/durable"
)

// Conflict is a local version of a file that lost to the store: the store
// won, the local content is kept here, never lost.
//
// On disk, under <state dir>/conflicts/, each conflict is two files written
// durably (tmp, fsync, rename, fsync dir): <id>.content holds the local
// bytes exactly, then <id>.json holds this struct. A conflict without its
// .json is incomplete (a crash between the two writes) and is not listed.
type Conflict struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	StoreID string    `json:"store_id"`
	Path    string    `json:"path"`
	// LocalSHA is the sha256 of the kept (losing) local content.
	LocalSHA string `json:"local_sha256"`
	// StoreSHA is the content_sha256 that won ("" when the store deleted
	// the memory and the local side was a delete it could not apply).
	StoreSHA      string `json:"store_sha256"`
	StoreMemoryID string `json:"store_memory_id,omitempty"`
	// Reason says which rule decided it.
	Reason string `json:"reason"`
	Size   int    `json:"size"`
}

// ConflictRetention bounds the conflict log: a conflict is dropped when it
// is older than MaxAge, or when the log holds more than MaxCount — but
// never while it is younger than MinAge, whatever the count.
type ConflictRetention struct {
	MaxAge   time.Duration // default 30 days
	MaxCount int           // default 1,000
	MinAge   time.Duration // default 7 days
}

func (r *ConflictRetention) defaults() {
	if r.MaxAge <= 0 {
		r.MaxAge = 30 * 24 * time.Hour
	}
	if r.MaxCount <= 0 {
		r.MaxCount = 1000
	}
	if r.MinAge <= 0 {
		r.MinAge = 7 * 24 * time.Hour
	}
}

// ConflictLog is the directory of kept conflicts, shared by every store
// mounted with one state dir. Safe for concurrent use within a process;
// ids are random, so processes don't collide.
type ConflictLog struct {
	dir string
	ret ConflictRetention
	mu  sync.Mutex // serializes Add and Prune
}

// ConflictDir is where a state dir keeps its conflicts.
func ConflictDir(stateDir string) string { return filepath.Join(stateDir, "conflicts") }

// OpenConflictLog returns the conflict log of a state dir (created on the
// first Add).
func OpenConflictLog(stateDir string, ret ConflictRetention) *ConflictLog {
	ret.defaults()
	return &ConflictLog{dir: ConflictDir(stateDir), ret: ret}
}

// Add keeps content as a conflict and returns it with its id and time.
func (l *ConflictLog) Add(c Conflict, content []byte) (Conflict, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.Time.IsZero() {
		c.Time = time.Now().UTC()
	}
	var b [4]byte
	rand.Read(b[:])
	c.ID = c.Time.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:])
	c.ID = strings.ReplaceAll(c.ID, ".", "")
	c.Size = len(content)
	if err := durable.WriteFile(filepath.Join(l.dir, c.ID+".content"), content, 0o600); err != nil {
		return c, fmt.Errorf("keep conflict of %s: %w", c.Path, err)
	}
	meta, _ := json.MarshalIndent(c, "", "  ")
	if err := durable.WriteFile(filepath.Join(l.dir, c.ID+".json"), append(meta, '\n'), 0o600); err != nil {
		return c, fmt.Errorf("keep conflict of %s: %w", c.Path, err)
	}
	l.pruneLocked(time.Now())
	return c, nil
}

// List returns every complete conflict, oldest first.
func (l *ConflictLog) List() ([]Conflict, error) {
	ents, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Conflict
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		c, err := l.meta(id)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (l *ConflictLog) meta(id string) (Conflict, error) {
	var c Conflict
	b, err := os.ReadFile(filepath.Join(l.dir, id+".json"))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("conflict %s: %w", id, err)
	}
	return c, nil
}

// Get returns one conflict and its kept content.
func (l *ConflictLog) Get(id string) (Conflict, []byte, error) {
	if id == "" || strings.ContainsAny(id, "/\\") || strings.HasPrefix(id, ".") {
		return Conflict{}, nil, fmt.Errorf("no conflict %q", id)
	}
	c, err := l.meta(id)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil, fmt.Errorf("no conflict %q in %s", id, l.dir)
	}
	if err != nil {
		return c, nil, err
	}
	content, err := os.ReadFile(filepath.Join(l.dir, id+".content"))
	return c, content, err
}

// Prune applies the retention rules now.
func (l *ConflictLog) Prune(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(now)
}

func (l *ConflictLog) pruneLocked(now time.Time) {
	all, err := l.List()
	if err != nil {
		return
	}
	over := len(all) - l.ret.MaxCount
	for _, c := range all { // oldest first
		age := now.Sub(c.Time)
		if age < l.ret.MinAge {
			break
		}
		if age > l.ret.MaxAge || over > 0 {
			os.Remove(filepath.Join(l.dir, c.ID+".json"))
			os.Remove(filepath.Join(l.dir, c.ID+".content"))
			over--
		}
	}
}
