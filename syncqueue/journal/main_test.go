package journal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testOpts returns options with a short group commit and a logger whose
// entries the returned hook records.
func testOpts() (Options, *logtest.Hook) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	return Options{GroupCommit: 5 * time.Millisecond, Log: log, Auth: testAuth}, hook
}

// testAuth is the state dir, store and session of the tests' journals.
var testAuth = Auth{
	Key:      bytes.Repeat([]byte{0x5a}, 32),
	Identity: "0123456789abcdef0123456789abcdef",
	StoreID:  "memstore_test",
}

// testSeal signs records as a journal opened with testAuth does.
func testSeal() *sealer {
	return newSealer(testAuth.Key, testAuth.StoreID, testAuth.Identity, testAuth.Session)
}

// testHeader is the start of a journal opened with testAuth: the file
// header for baseLSN and the CONTEXT record.
func testHeader(baseLSN uint64) []byte {
	c := journalContext{storeID: testAuth.StoreID, identity: testAuth.Identity, session: testAuth.Session}
	return append(encodeHeader(baseLSN), encodeContext(c, testSeal())...)
}

// testEmptyLen is the size of a journal of testAuth with no record.
var testEmptyLen = int64(len(testHeader(0)))

// open opens dir with opts and closes the journal when the test ends (a
// second Close is harmless).
func open(t testing.TB, dir string, opts Options) *Journal {
	t.Helper()
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { closeJ(t, j) })
	return j
}

func closeJ(t testing.TB, j *Journal) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := j.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func put(t testing.TB, j *Journal, fileID, path, content string) uint64 {
	t.Helper()
	lsn, err := j.Put(fileID, path, []byte(content))
	if err != nil {
		t.Fatalf("Put(%s): %v", fileID, err)
	}
	return lsn
}

func del(t testing.TB, j *Journal, fileID, path string) uint64 {
	t.Helper()
	lsn, err := j.Delete(fileID, path)
	if err != nil {
		t.Fatalf("Delete(%s): %v", fileID, err)
	}
	return lsn
}

func confirm(t testing.TB, j *Journal, fileID string, lsn uint64, memoryID, sha, path string) {
	t.Helper()
	if err := j.Confirm(fileID, lsn, memoryID, sha, path); err != nil {
		t.Fatalf("Confirm(%s, %d): %v", fileID, lsn, err)
	}
}

func journalPath(dir string) string { return filepath.Join(dir, journalFileName) }

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pendingByID indexes Pending by FileID.
func pendingByID(j *Journal) map[string]Entry {
	m := make(map[string]Entry)
	for _, e := range j.Pending() {
		m[e.FileID] = e
	}
	return m
}

// hasLog reports whether hook recorded an entry at level whose message
// contains substr.
func hasLog(hook *logtest.Hook, level logrus.Level, substr string) bool {
	for _, e := range hook.AllEntries() {
		if e.Level == level && strings.Contains(e.Message, substr) {
			return true
		}
	}
	return false
}

// testKeys are the scan checks of a journal opened with testAuth.
func testKeys() scanKeys {
	return scanKeys{key: testAuth.Key, want: journalContext{storeID: testAuth.StoreID, identity: testAuth.Identity, session: testAuth.Session}}
}
